"""The dual-mode model's two samplers, from noise (t = 0) on the same shifted grid (`grids.shifted(steps, shift)`),
one network evaluation per step:

- `sample_mv`: Euler steps of the MV mode's velocity (the core's `solve_ode`); the last step lands on its data
  prediction. Views only: 3D needs a reconstruction afterwards.
- `sample_3d`: the 3D-consistent sampler: at each grid time t_k the 3D mode's Gaussians are rendered to the rig
  (the data prediction x0_3d), then re-noised to the next time with fresh noise, x_{k+1} = t_{k+1} x0_3d +
  (1 - t_{k+1}) eps; the last step's Gaussians are the output.

Both keep the states they evaluated the network at (the backward simulation of DMD2 draws its inputs there).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core import grids
from flowlab.core.solvers import solve_ode
from flowlab.vision_gen.flashworld.model import DualModeModel, MVField, check_views
from flowlab.vision_gen.kit.splatting import Gaussians

__all__ = ["Sample", "sample_3d", "sample_grid", "sample_mv"]


@dataclass(frozen=True)
class Sample:
    """`views` (B, V, 3, S, S) in [-1, 1]; `gaussians` (the 3D mode's) or None (the MV mode's); `states` (steps, B,
    V, 3, S, S): the network's input at each step; `times` (steps,): the grid times of those inputs."""

    views: torch.Tensor
    gaussians: Gaussians | None
    states: torch.Tensor
    times: torch.Tensor


def sample_grid(steps: int, shift: float, *, device: torch.device | str | None = None) -> torch.Tensor:
    """(steps + 1,) times from 0 to 1: the shifted grid both samplers use (shift > 1 spends steps near noise)."""
    return grids.shifted(steps, shift, device=device)


def _check(model: DualModeModel, image: torch.Tensor, noise: torch.Tensor) -> None:
    check_views(noise, model.config, "noise")
    s = model.config.rig.size
    if not isinstance(image, torch.Tensor) or tuple(image.shape) != (noise.shape[0], 3, s, s):
        raise ValueError(f"image: expected ({noise.shape[0]}, 3, {s}, {s}), got {getattr(image, 'shape', image)}")
    if not bool(torch.isfinite(image).all()):
        raise ValueError("image: expected finite values")


def sample_mv(model: DualModeModel, image: torch.Tensor, noise: torch.Tensor, *, steps: int, shift: float = 3.0
              ) -> Sample:  # fmt: skip
    """MV mode: Euler on the shifted grid from noise (B, V, 3, S, S) given the conditioning image (B, 3, S, S)."""
    _check(model, image, noise)
    grid = sample_grid(steps, shift, device=noise.device)
    traj = solve_ode(MVField(model), noise, grid, method="euler", return_trajectory=True, image=image)
    return Sample(traj.states[-1], None, traj.states[:-1], grid[:-1])


def sample_3d(
    model: DualModeModel,
    image: torch.Tensor,
    noise: torch.Tensor,
    *,
    steps: int,
    shift: float = 3.0,
    generator: torch.Generator,
) -> Sample:
    """3D mode: render the Gaussians, re-noise with fresh noise from `generator`, repeat; `steps` evaluations."""
    _check(model, image, noise)
    grid = sample_grid(steps, shift, device=noise.device)
    x, states = noise, []
    for k in range(steps):
        states.append(x)
        out = model.predict_3d(x, grid[k].expand(len(x)), image)
        if k + 1 < steps:
            eps = torch.randn(x.shape, generator=generator, device=generator.device).to(x)
            x = grid[k + 1] * out.renders + (1 - grid[k + 1]) * eps
    return Sample(out.renders, out.gaussians, torch.stack(states), grid[:-1])
