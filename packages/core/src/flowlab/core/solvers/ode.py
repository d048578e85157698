"""Fixed-grid ODE integration of a vector field, and its inversion (data -> source) on the reversed grid."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.solvers.steppers import STEPPERS, JVPState, Stepper, euler, heun, jvp_euler, midpoint, rk4
from flowlab.core.solvers.trajectory import StepInfo, Trajectory, batched_times, check_callback, run_grid
from flowlab.core.validation import check_choice, check_grid, check_tensor

__all__ = ["invert_ode", "solve_ode"]

_TENSOR_STEPPERS = (euler, midpoint, heun, rk4)


def _resolve_stepper(method: str | Stepper) -> Stepper:
    if callable(method):
        return method
    if not isinstance(method, str):
        raise ValueError(f"method: expected a stepper name or a callable, got {type(method).__name__}")
    return STEPPERS[check_choice(method, STEPPERS, "method")]


def _check_state(x_init: Any, stepper: Stepper, name: str) -> torch.Tensor:
    """Validate the initial state; returns the tensor that fixes the batch size, device and dtype."""
    if isinstance(x_init, JVPState):
        if stepper in _TENSOR_STEPPERS:
            raise ValueError(f"{name}: a JVPState needs method='jvp_euler' (or a stepper written for it)")
        check_tensor(x_init.x, f"{name}.x")
        check_tensor(x_init.tangent, f"{name}.tangent")
        if x_init.tangent.shape != x_init.x.shape:
            shapes = f"{tuple(x_init.tangent.shape)} vs {tuple(x_init.x.shape)}"
            raise ValueError(f"{name}.tangent: expected the shape of {name}.x, got {shapes}")
        return x_init.x
    if stepper is jvp_euler:
        raise ValueError(f"{name}: method 'jvp_euler' needs a JVPState(x, tangent), got {type(x_init).__name__}")
    return check_tensor(x_init, name)


def solve_ode(
    field: Callable[..., torch.Tensor],
    x_init: torch.Tensor | JVPState,
    grid: torch.Tensor,
    *,
    method: str | Stepper = "heun",
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | JVPState | Trajectory:
    """Integrate dx/dt = field(x=x, t=t, **cond) from grid[0] to grid[-1].

    field: a `VectorField`, called with `x: (B, ...)` and `t: (B,)`; x_init: (B, ...) (a `JVPState` for
    method="jvp_euler"); grid: (N + 1,) strictly monotone times in [0, 1], either direction (flip a forward grid
    to run from data to source); method: "euler" | "midpoint" | "heun" | "rk4" | "jvp_euler" or any stepper
    `(field, x, t, t_next, **cond) -> x_next`; callback: called with a `StepInfo` after every step.

    Returns the final state (B, ...), or a `Trajectory(times=grid, states=(N + 1, B, ...))` with
    `return_trajectory=True`. Gradients flow to x_init and the field's parameters; wrap the call in
    `torch.inference_mode()` when none are needed. Inputs are validated once, before the loop.
    """
    stepper = _resolve_stepper(method)
    if not callable(field):
        raise ValueError(f"field: expected a callable field(x=..., t=...), got {type(field).__name__}")
    ref = _check_state(x_init, stepper, "x_init")
    check_grid(grid, "grid")
    check_callback(callback)
    times = batched_times(grid, ref)

    def step(i, x, t, t_next):
        return stepper(field, x, t, t_next, **cond)

    return run_grid(step, x_init, times, grid, return_trajectory=return_trajectory, callback=callback)


def invert_ode(
    field: Callable[..., torch.Tensor],
    x_1: torch.Tensor,
    grid: torch.Tensor,
    *,
    method: str | Stepper = "heun",
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """Map data back to the source: `solve_ode` on `grid.flip(0)`, where `grid` is the forward grid used for
    sampling (so `invert_ode(f, solve_ode(f, x, g), g)` round-trips x up to the discretisation error).

    x_1: (B, ...) points at time grid[-1]; returns the points at time grid[0] (or their `Trajectory`).
    """
    stepper = _resolve_stepper(method)
    _check_state(x_1, stepper, "x_1")
    check_grid(grid, "grid")
    return solve_ode(
        field, x_1, grid.flip(0), method=stepper, return_trajectory=return_trajectory, callback=callback, **cond
    )
