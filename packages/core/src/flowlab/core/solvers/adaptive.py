"""Adaptive-step ODE integration through `torchdiffeq.odeint` (and its adjoint), counting field evaluations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torchdiffeq
from torch import nn

from flowlab.core.validation import check_choice, check_grid, check_tensor

__all__ = ["ADAPTIVE_METHODS", "AdaptiveSolution", "solve_ode_adaptive"]

#: torchdiffeq methods offered; fixed-step ones ("rk4") step between the t_span points unless
#: `options={"step_size": h}` is given.
ADAPTIVE_METHODS = ("dopri5", "dopri8", "bosh3", "fehlberg2", "adaptive_heun", "rk4")


@dataclass(frozen=True)
class AdaptiveSolution:
    """x: (B, ...) the state at t_span[-1]; times: t_span (T,); states: (T, B, ...) the state at every t_span
    point; nfe: field evaluations of the forward solve (an adjoint backward pass adds its own)."""

    x: torch.Tensor
    times: torch.Tensor
    states: torch.Tensor
    nfe: int


class _CountingField(nn.Module):
    """torchdiffeq's `func(t, y)` (t a 0-d tensor) as a keyword call of the field with t: (B,), counting calls.

    A module, so that the adjoint finds the field's parameters when the field is a module or a bound method of
    one."""

    def __init__(self, field: Callable[..., torch.Tensor], ones: torch.Tensor, cond: Mapping[str, Any]) -> None:
        super().__init__()
        self.field = field
        owner = getattr(field, "__self__", None)
        if isinstance(owner, nn.Module):
            self.owner = owner
        self.ones = ones
        self.cond = dict(cond)
        self.nfe = 0

    def forward(self, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        self.nfe += 1
        return self.field(x=x, t=t * self.ones, **self.cond)


def solve_ode_adaptive(
    field: Callable[..., torch.Tensor],
    x_init: torch.Tensor,
    t_span: torch.Tensor,
    *,
    method: str = "dopri5",
    atol: float = 1e-5,
    rtol: float = 1e-5,
    adjoint: bool = False,
    options: Mapping[str, Any] | None = None,
    **cond: Any,
) -> AdaptiveSolution:
    """Integrate dx/dt = field(x=x, t=t, **cond) with an adaptive torchdiffeq solver.

    x_init: (B, ...); t_span: (T,) strictly monotone times in [0, 1] (at least the two ends; the state is reported
    at each); method: one of `ADAPTIVE_METHODS`; adjoint: backpropagate with the adjoint method (memory O(1) in
    the steps; the field's parameters are found when the field is an `nn.Module` or a bound method of one);
    options: passed to torchdiffeq.
    """
    check_choice(method, ADAPTIVE_METHODS, "method")
    if not callable(field):
        raise ValueError(f"field: expected a callable field(x=..., t=...), got {type(field).__name__}")
    check_tensor(x_init, "x_init")
    check_grid(t_span, "t_span")
    for name, tol in (("atol", atol), ("rtol", rtol)):
        if not tol > 0:
            raise ValueError(f"{name}: expected a positive tolerance, got {tol}")
    times = t_span.to(device=x_init.device, dtype=x_init.dtype)
    func = _CountingField(field, torch.ones(x_init.shape[0], device=x_init.device, dtype=x_init.dtype), cond)
    odeint = torchdiffeq.odeint_adjoint if adjoint else torchdiffeq.odeint
    states = odeint(func, x_init, times, method=method, atol=atol, rtol=rtol, options=dict(options or {}))
    return AdaptiveSolution(x=states[-1], times=times, states=states, nfe=func.nfe)
