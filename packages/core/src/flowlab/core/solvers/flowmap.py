"""Sampling with a two-time flow map X_{s,t}: any number of steps along a grid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.solvers.trajectory import StepInfo, Trajectory, batched_times, check_callback, run_grid
from flowlab.core.validation import check_grid, check_tensor

__all__ = ["sample_flow_map"]


def sample_flow_map(
    flow_map: Callable[..., torch.Tensor],
    x_init: torch.Tensor,
    grid: torch.Tensor,
    *,
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """x <- flow_map(x=x, s=t_i, t=t_{i+1}, **cond) along the grid (one map evaluation per step).

    flow_map: a `FlowMap` with `s, t: (B,)`; x_init: (B, ...); grid: (N + 1,) strictly monotone in [0, 1]
    (`grids.uniform(1)` is one-step generation). Returns the final state or a `Trajectory`.
    """
    if not callable(flow_map):
        raise ValueError(f"flow_map: expected a callable flow_map(x=..., s=..., t=...), got {type(flow_map).__name__}")
    check_tensor(x_init, "x_init")
    check_grid(grid, "grid")
    check_callback(callback)
    times = batched_times(grid, x_init)

    def step(i, x, s, t):
        return flow_map(x=x, s=s, t=t, **cond)

    return run_grid(step, x_init, times, grid, return_trajectory=return_trajectory, callback=callback)
