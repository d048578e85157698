"""diffusers builds models from configs offline, and its schedules agree with the core's DiscreteVP."""

from __future__ import annotations

import torch
from diffusers import DDIMScheduler, UNet2DModel

from flowlab.core.schedules import DiscreteVP


def test_tiny_unet_from_config_runs_offline():
    net = UNet2DModel(
        sample_size=8,
        in_channels=1,
        out_channels=1,
        block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        layers_per_block=1,
        norm_num_groups=8,
    )
    out = net(torch.randn(2, 1, 8, 8), torch.tensor([10, 500])).sample
    assert out.shape == (2, 1, 8, 8) and torch.isfinite(out).all()


def test_diffusers_scaled_linear_matches_core_discrete_vp():
    sched = DDIMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, num_train_timesteps=1000)
    ours = DiscreteVP.scaled_linear()
    assert torch.allclose(ours.alphas_cumprod, sched.alphas_cumprod.double(), rtol=1e-5)
    k = torch.tensor([0.0, 499.0, 999.0], dtype=torch.float64)
    out = ours(ours.time_of(k))
    assert torch.allclose(out.alpha**2, sched.alphas_cumprod.double()[k.long()], rtol=1e-5)
