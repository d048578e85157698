"""Pure one-step ODE integrators with one signature: `stepper(field, x, t, t_next, **cond) -> x_next`.

`x: (B, ...)`; `t, t_next: (B,)`, one time per sample (the solvers build them once per grid, so a stepper never
allocates them); the field is always called as `field(x=x, t=t, **cond)` with `t: (B,)`. The step h = t_next - t
may be negative (integration from data to source). Orders: euler 1, midpoint 2, heun 2, rk4 4.

`jvp_euler` carries a tangent J alongside x (dJ/dt = (dv/dx) J, advanced by `torch.func.jvp` in the same
network call), on a `JVPState(x, tangent)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.validation import expand_like

__all__ = ["STEPPERS", "JVPState", "Stepper", "euler", "heun", "jvp_euler", "midpoint", "rk4"]

#: (field, x, t, t_next, **cond) -> x_next
Stepper = Callable[..., Any]


def euler(field, x: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> torch.Tensor:
    """x + h v(x, t). One field evaluation, order 1."""
    return torch.addcmul(x, expand_like(t_next - t, x), field(x=x, t=t, **cond))


def midpoint(field, x: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> torch.Tensor:
    """x + h v(x + h/2 v(x, t), t + h/2). Two field evaluations, order 2."""
    dt = t_next - t
    h = expand_like(dt, x)
    x_mid = torch.addcmul(x, 0.5 * h, field(x=x, t=t, **cond))
    return torch.addcmul(x, h, field(x=x_mid, t=t + 0.5 * dt, **cond))


def heun(field, x: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> torch.Tensor:
    """Explicit trapezoid: x + h/2 (v(x, t) + v(x + h v(x, t), t_next)). Two field evaluations, order 2."""
    h = expand_like(t_next - t, x)
    v = field(x=x, t=t, **cond)
    v_next = field(x=torch.addcmul(x, h, v), t=t_next, **cond)
    return torch.addcmul(x, 0.5 * h, v + v_next)


def rk4(field, x: torch.Tensor, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> torch.Tensor:
    """The classical fourth-order Runge-Kutta step. Four field evaluations, order 4."""
    dt = t_next - t
    h = expand_like(dt, x)
    t_mid = t + 0.5 * dt
    k1 = field(x=x, t=t, **cond)
    k2 = field(x=torch.addcmul(x, 0.5 * h, k1), t=t_mid, **cond)
    k3 = field(x=torch.addcmul(x, 0.5 * h, k2), t=t_mid, **cond)
    k4 = field(x=torch.addcmul(x, h, k3), t=t_next, **cond)
    return torch.addcmul(x, h / 6, k1 + 2 * (k2 + k3) + k4)


@dataclass(frozen=True)
class JVPState:
    """A point x: (B, ...) and a tangent vector at it, tangent: (B, ...) (the derivative of x in some direction)."""

    x: torch.Tensor
    tangent: torch.Tensor


def jvp_euler(field, state: JVPState, t: torch.Tensor, t_next: torch.Tensor, **cond: Any) -> JVPState:
    """Euler on (x, J): x <- x + h v(x, t), J <- J + h (dv/dx)(x, t) J, with v and (dv/dx) J from one
    `torch.func.jvp` call. Starting from J_0 = dx_0/de, J_N is the exact derivative dx_N/de of the Euler map."""
    h = expand_like(t_next - t, state.x)
    v, dv = torch.func.jvp(lambda x: field(x=x, t=t, **cond), (state.x,), (state.tangent,))
    return JVPState(torch.addcmul(state.x, h, v), torch.addcmul(state.tangent, h, dv))


STEPPERS: dict[str, Stepper] = {
    "euler": euler,
    "midpoint": midpoint,
    "heun": heun,
    "rk4": rk4,
    "jvp_euler": jvp_euler,
}
