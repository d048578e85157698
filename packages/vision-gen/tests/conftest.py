"""Shared fixtures of the vision-gen tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def tiny_sd_parts():
    """(unet, vae, scheduler): a Stable-Diffusion-shaped conditional UNet (8x8x4 latents, cross-attention width 8),
    a VAE (16x16 RGB <-> 8x8x4) and an SD-style DDIM scheduler (trailing spacing), all from configs with random
    weights drawn from seed 0 (eval mode)."""
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, block_out_channels=(4, 8), layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=8, norm_num_groups=2, attention_head_dim=2,
    ).eval()  # fmt: skip
    vae = AutoencoderKL(
        block_out_channels=(4, 8), latent_channels=4, norm_num_groups=2, in_channels=3, out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
    ).eval()  # fmt: skip
    scheduler = DDIMScheduler(
        beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, set_alpha_to_one=False,
        timestep_spacing="trailing", clip_sample=False,
    )  # fmt: skip
    return unet, vae, scheduler
