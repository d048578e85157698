"""Steppers that keep a bounded state inside its range: Euler, and Euler on (x, J), clipped after every step.

A flow towards data in [low, high] (returns in a value range, actions in [-1, 1]) can overshoot it with a coarse
grid. `clipped_euler(low, high)` clamps the state after each step, to [low, high] itself or, given `noise_bound`,
to the envelope of the linear path z_t = t x_1 + (1 - t) eps that data in [low, high] and noise |eps| <= noise_bound
can reach (`path_envelope`). Both return steppers for `solve_ode` (the one-step signature of `steppers`).
"""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.solvers.steppers import JVPState, Stepper, jvp_euler

__all__ = ["clipped_euler", "clipped_jvp_euler", "path_envelope", "scalar_vjp_euler"]


def path_envelope(low: float, high: float, noise_bound: float, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds of the linear path z_t = t x1 + (1 - t) eps for x1 in [low, high] and |eps| <= noise_bound:
    [t low - (1 - t) c, t high + (1 - t) c], (B,) tensors for flow times t: (B,). At t = 1 this is [low, high]; with
    noise_bound 0 it is [t low, t high], which clips noise to the target range from the first step."""
    pad = (1 - t) * noise_bound
    return t * low - pad, t * high + pad


def _clip(x: torch.Tensor, t: torch.Tensor, low: float, high: float, noise_bound: float | None) -> torch.Tensor:
    """x: (B, D) clamped to [low, high] (noise_bound None) or to the path envelope at times t: (B,)."""
    if noise_bound is None:
        return x.clamp(low, high)
    lo, hi = path_envelope(low, high, noise_bound, t)
    return torch.maximum(torch.minimum(x, hi[:, None]), lo[:, None])


def _check_range(low: float, high: float, noise_bound: float | None) -> None:
    if not low < high:
        raise ValueError(f"low, high: expected low < high, got [{low}, {high}]")
    if noise_bound is not None and not noise_bound >= 0:
        raise ValueError(f"noise_bound: expected a bound >= 0 or None, got {noise_bound}")


def clipped_euler(
    low: float, high: float, *, noise_bound: float | None = None, time_scale: torch.Tensor | None = None
) -> Stepper:
    """An Euler stepper for `solve_ode` that clips the state (B, D) after every step: to [low, high] (noise_bound
    None), or to the `path_envelope` at the step's end time (times `time_scale`: (B,), when the grid is rescaled per
    sample)."""
    _check_range(low, high, noise_bound)

    def step(field: Any, x: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> torch.Tensor:
        h = (t_next - t).view(-1, *([1] * (x.dim() - 1)))
        end = t_next if time_scale is None else t_next * time_scale
        return _clip(x + h * field(x=x, t=t, **cond), end.expand(x.shape[0]), low, high, noise_bound)

    return step


def scalar_vjp_euler(field: Any, state: JVPState, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> JVPState:
    """`jvp_euler` for a per-sample scalar state x: (B, 1): dv/dx is a 1x1 Jacobian per sample, so one reverse pass
    of sum(v) gives it exactly (samples do not interact); on CPU this is several times cheaper than forward-mode AD.
    The graph is local to the step (no gradient flows to the parameters)."""
    if state.x.dim() != 2 or state.x.shape[1] != 1:
        raise ValueError(f"state.x: expected a scalar state per sample (B, 1), got shape {tuple(state.x.shape)}")
    h = (t_next - t)[:, None]
    with torch.enable_grad():
        x = state.x.detach().requires_grad_(True)
        v = field(x=x, t=t, **cond)
        (dv,) = torch.autograd.grad(v.sum(), x)
    return JVPState(state.x + h * v.detach(), state.tangent + h * dv * state.tangent)


def clipped_jvp_euler(
    low: float,
    high: float,
    *,
    mode: str = "jvp",
    noise_bound: float | None = None,
    time_scale: torch.Tensor | None = None,
) -> Stepper:
    """Euler on (x, J) that clips x like `clipped_euler` after every step; the tangent of a clipped entry is zeroed
    (the derivative of the clip), so J stays the exact derivative of the clipped Euler map. mode "jvp": `jvp_euler`
    (torch.func.jvp); "vjp": `scalar_vjp_euler`, for scalar states (B, 1) only, and faster on CPU."""
    if mode not in ("jvp", "vjp"):
        raise ValueError(f"mode: expected 'jvp' or 'vjp', got {mode!r}")
    _check_range(low, high, noise_bound)
    inner = jvp_euler if mode == "jvp" else scalar_vjp_euler

    def step(field: Any, state: JVPState, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> JVPState:
        nxt = inner(field, state, t, t_next, **cond)
        end = t_next if time_scale is None else t_next * time_scale
        x = _clip(nxt.x, end.expand(nxt.x.shape[0]), low, high, noise_bound)
        return JVPState(x, nxt.tangent * (x == nxt.x))

    return step
