"""SFBD (Lu et al., ICML 2025), the Gaussian-noise predecessor: an EDM denoiser pretrained on the clean set; each
round denoises every noisy observation by starting the deterministic EDM Heun sampler at sigma = the noise level from
the observation itself (y = x + sigma e is the VE state at sigma), then retrains the denoiser on the denoised set
(no clean mixing). Same optimiser/EMA recipe and step counts as `sfbd_omni`, so the two compare at equal compute."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from flowlab.core.grids import uniform
from flowlab.core.losses import edm_loss
from flowlab.core.nets import EDMPreconditioner
from flowlab.core.schedules import EDM
from flowlab.core.solvers import edm_sample
from flowlab.core.train import EMA, fit
from flowlab.core.validation import check_device
from flowlab.vision_gen.kit.corruptions import GaussianNoise
from flowlab.vision_gen.sfbd_omni.model import ImageMLP, SFBDConfig
from flowlab.vision_gen.sfbd_omni.train import mixture_batches

__all__ = ["SFBDBaseline", "sfbd_denoise", "sfbd_gaussian"]


@dataclass(frozen=True)
class SFBDBaseline:
    """denoiser: the EDM denoiser (EMA weights, eval mode); pools: the denoised sets after pretraining (round 0) and
    after each round, (N, C, H, W) each, on the CPU."""

    denoiser: EDMPreconditioner
    pools: list[torch.Tensor]


def sfbd_denoise(
    denoiser: EDMPreconditioner, y: torch.Tensor, corruption: GaussianNoise, config: SFBDConfig
) -> torch.Tensor:
    """SFBD's posterior step: the deterministic EDM Heun sampler from y (N, C, H, W) at sigma = the noise level down
    to 0 in config.sampler_steps levels, in chunks of 4096."""
    sigmas = torch.cat([EDM(sigma_max=corruption.sigma)(uniform(config.sampler_steps - 1)).sigma, torch.zeros(1)])
    with torch.no_grad():
        return torch.cat([edm_sample(denoiser, None, sigmas.to(y), x_init=c) for c in y.split(4096)])


def sfbd_gaussian(
    y: torch.Tensor,
    clean: torch.Tensor,
    corruption: GaussianNoise,
    config: SFBDConfig,
    *,
    device: torch.device | str = "cpu",
    callback: Callable[[int, torch.Tensor], None] | None = None,
) -> SFBDBaseline:
    """SFBD on noisy observations y: (N, C, H, W) = x + sigma e with a clean set (n >= 1, C, H, W), pretrained for
    config.pretrain_steps and retrained config.rounds times for config.steps_per_round."""
    if not isinstance(corruption, GaussianNoise) or corruption.sigma <= 0:
        raise ValueError(f"corruption: SFBD needs Gaussian noise with sigma > 0, got {corruption!r}")
    if clean.shape[0] == 0:
        raise ValueError("clean: SFBD pretrains its denoiser on the clean set; got none")
    device = check_device(device)
    y, clean = y.to(device), clean.to(device)
    denoiser = EDMPreconditioner(ImageMLP(tuple(clean.shape[1:]), hidden=config.hidden, seed=config.seed))
    denoiser.to(device)
    opt = torch.optim.Adam(denoiser.parameters(), lr=config.lr)
    ema = EMA(denoiser, decay=config.ema_decay, warmup_steps=100)
    g = torch.Generator().manual_seed(config.seed)
    pool = {"x": clean}
    pools = []

    def loss(net, x, gen):
        return edm_loss(net, x, generator=gen), {}

    for k in range(config.rounds + 1):
        steps = config.pretrain_steps if k == 0 else config.steps_per_round
        if steps:
            fit(denoiser, loss, mixture_batches(pool, clean[:0], 0.0, config.batch_size), steps=steps, optimizer=opt,
                ema=ema, device=device, generator=g, progress=False, log_every=max(1, steps // 4))  # fmt: skip
        with ema.swap():
            pool["x"] = sfbd_denoise(denoiser.eval(), y, corruption, config)
            denoiser.train()
        pools.append(pool["x"].cpu().clone())
        if callback is not None:
            callback(k, pools[-1])
    ema.copy_to_model()
    return SFBDBaseline(denoiser.eval().requires_grad_(False), pools)
