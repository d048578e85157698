"""DDIM / DPM-Solver++ generation and inversion of the kit's denoisers, using `flowlab.core.solvers.diffusion`.

Grids visit diffusers' "trailing" timesteps K-1, K-1-K/n, ..., K/n - 1 and end at timestep 0 (t = 1 - 1/K): on
this grid the core's DDIM equals diffusers' DDIMScheduler(timestep_spacing="trailing", set_alpha_to_one=False).
"""

from __future__ import annotations

import torch

from flowlab.core.solvers.diffusion import invert, sample_diffusion

__all__ = ["generate", "invert_to_noise", "time_grid"]


def time_grid(steps: int, num_train_steps: int = 1000, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(steps + 1,) core times of the timesteps round(K - i K / steps) - 1 (i < steps), then of timestep 0."""
    if not (isinstance(steps, int) and 1 <= steps < num_train_steps):
        raise ValueError(f"steps: expected an integer in [1, {num_train_steps}), got {steps!r}")
    k = torch.round(num_train_steps - torch.arange(steps, dtype=torch.float64) * num_train_steps / steps) - 1
    k = torch.cat([k, torch.zeros(1, dtype=torch.float64)])
    return (1 - (k + 1) / num_train_steps).to(dtype)


def generate(field, x_init: torch.Tensor, *, steps: int = 50, method: str = "dpmpp_2m", **cond) -> torch.Tensor:
    """Deterministic samples from initial noise x_init: (B, C, H, W)."""
    grid = time_grid(steps, field.schedule.num_steps).to(x_init.device)
    with torch.inference_mode():
        return sample_diffusion(
            field, x_init, grid, schedule=field.schedule, prediction=field.prediction, method=method, **cond
        )


def invert_to_noise(
    field, images: torch.Tensor, *, steps: int = 50, method: str = "ddim", exact: bool = False, **cond
) -> torch.Tensor:
    """Recovered initial noise of `images` (B, C, H, W) at the data end of the grid (naive or exact inversion)."""
    grid = time_grid(steps, field.schedule.num_steps).to(images.device)
    ctx = torch.no_grad() if exact else torch.inference_mode()
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
