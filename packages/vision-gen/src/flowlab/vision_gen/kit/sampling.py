"""DDIM / DPM-Solver++ generation and inversion of the kit's denoisers, using `flowlab.core.solvers.diffusion`, and
`batched` to run them a few images at a time.

Grids are the core's `grids.trailing`: diffusers' "trailing" timesteps K-1, K-1-K/n, ..., K/n - 1, then timestep 0
(t = 1 - 1/K), on which the core's DDIM equals diffusers' DDIMScheduler(timestep_spacing="trailing").
"""

from __future__ import annotations

import torch

from flowlab.core.grids import trailing
from flowlab.core.solvers.diffusion import invert, sample_diffusion

__all__ = ["batched", "generate", "invert_to_noise"]


def batched(fn, x: torch.Tensor, batch: int) -> torch.Tensor:
    """fn applied to x (N, ...) `batch` rows at a time, the outputs concatenated along the first axis."""
    return torch.cat([fn(x[i : i + batch]) for i in range(0, x.shape[0], batch)])


def generate(field, x_init: torch.Tensor, *, steps: int = 50, method: str = "dpmpp_2m", **cond) -> torch.Tensor:
    """Deterministic samples from initial noise x_init: (B, C, H, W)."""
    grid = trailing(field.schedule, steps, device=x_init.device)
    with torch.inference_mode():
        return sample_diffusion(
            field, x_init, grid, schedule=field.schedule, prediction=field.prediction, method=method, **cond
        )


def invert_to_noise(
    field,
    images: torch.Tensor,
    *,
    steps: int = 50,
    method: str = "ddim",
    exact: bool = False,
    differentiable: bool = False,
    **cond,
) -> torch.Tensor:
    """Recovered initial noise of `images` (B, C, H, W) at the data end of the grid (naive or exact inversion).
    differentiable=True keeps the autograd graph of the naive inversion back to `images` (for attacks on it)."""
    if differentiable and exact:
        raise ValueError("exact: the fixed-point inversion is not differentiable; use exact=False with differentiable")
    grid = trailing(field.schedule, steps, device=images.device)
    ctx = torch.enable_grad() if differentiable else torch.no_grad() if exact else torch.inference_mode()
    with ctx:
        return invert(
            field,
            images,
            grid,
            schedule=field.schedule,
            prediction=field.prediction,
            method=method,
            exact=exact,
            **cond,
        ).noise
