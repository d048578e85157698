"""Sampling a Brownian-bridge model from a given start: the exact bridge transition toward the predicted endpoint.

A bridge model (trained on a `BridgePath` or `AugmentedBridgePath` of constant sigma) predicts the drift
(x_1 - x_t) / (1 - t), hence the endpoint x_1 = x_t + (1 - t) drift. Given that endpoint, the bridge's law between
t and t' is Gaussian, x_t' = x_t + (t' - t) / (1 - t) (x_1 - x_t) + sigma sqrt((t' - t)(1 - t') / (1 - t)) z, the
ancestral step (I2SB, DDBM): it lands exactly on the predicted endpoint at t' = 1, where Euler-Maruyama would add
sigma sqrt(h) of noise after the last prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.distributions import Generators, randn
from flowlab.core.solvers.trajectory import StepInfo, Trajectory, batched_times, check_callback, run_grid
from flowlab.core.validation import check_grid, check_tensor, expand_like

__all__ = ["sample_bridge"]


def sample_bridge(
    drift: Callable[..., torch.Tensor],
    x_init: torch.Tensor,
    grid: torch.Tensor,
    *,
    sigma: float,
    generator: Generators = None,
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """Run a bridge model from x_init at grid[0] to grid[-1] = 1 by exact bridge transitions (see the module).

    drift: called as `drift(x=x, t=t, **cond)` with `x: (B, ...)`, `t: (B,)`, returning (x_1 - x_t) / (1 - t);
    x_init: (B, ...) the start, e.g. a noised observation y' (`AugmentedBridgePath.source`); grid: (N + 1,)
    increasing in [0, 1] and ending at 1; sigma: the path's diffusion coefficient (0 gives the deterministic
    endpoint-interpolation sampler); generator: one, or one per sample. Returns the state at t = 1 or, with
    `return_trajectory=True`, the `Trajectory`.
    """
    if not callable(drift):
        raise ValueError(f"drift: expected a callable drift(x=..., t=...), got {type(drift).__name__}")
    check_tensor(x_init, "x_init")
    check_grid(grid, "grid")
    if not bool(grid[-1] > grid[0]) or float(grid[-1]) != 1.0:
        raise ValueError("grid: expected increasing times ending at t = 1 (the data end of the bridge)")
    if not (isinstance(sigma, int | float) and math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma: expected a non-negative number, got {sigma!r}")
    check_callback(callback)
    times = batched_times(grid, x_init)
    shape, device, dtype = x_init.shape, x_init.device, x_init.dtype

    def step(i, x, t, t_next):
        remaining = expand_like(1 - t, x)
        x_1 = x + remaining * drift(x=x, t=t, **cond)
        frac = expand_like(t_next - t, x) / remaining
        x_next = torch.lerp(x, x_1, frac)
        if sigma > 0 and i < len(times) - 2:
            std = sigma * torch.sqrt(expand_like(t_next - t, x) * expand_like(1 - t_next, x) / remaining)
            x_next = x_next + std * randn(shape, generator=generator, device=device, dtype=dtype)
        return x_next

    return run_grid(step, x_init, times, grid, return_trajectory=return_trajectory, callback=callback)
