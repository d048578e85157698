"""Simulation of weighted particles: dx/dτ = v(τ, x), d ln w/dτ = g(τ, x) on the augmented state [x, ln w]."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.solvers import solve_ode_adaptive

__all__ = ["AugmentedField", "ParticleTrajectory", "simulate_particles"]


class AugmentedField(nn.Module):
    """The field of the augmented state z = [x, ln w]: z: (B, d + 1), t: (B,) -> [v(t, x), g(t, x)] (B, d + 1).

    `fields` is any module with `forward(x=, t=) -> (B, d)` (velocity) and `growth(x=, t=) -> (B,)`.
    """

    def __init__(self, fields: nn.Module) -> None:
        super().__init__()
        self.fields = fields

    def forward(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """z: (B, d + 1), t: (B,) -> `[v(t, x), g(t, x)]`: (B, d + 1), where x is z without its last (log-weight)
        column."""
        pos = x[:, :-1]
        return torch.cat([self.fields(x=pos, t=t), self.fields.growth(x=pos, t=t)[:, None]], dim=1)


@dataclass(frozen=True)
class ParticleTrajectory:
    """Particles at each requested (normalised) time: tau: (K,), x: (K, n, d), log_w: (K, n); nfe: field calls."""

    tau: torch.Tensor
    x: torch.Tensor
    log_w: torch.Tensor
    nfe: int

    @property
    def weights(self) -> torch.Tensor:
        """Unnormalised masses w = exp(ln w): (K, n)."""
        return self.log_w.exp()


def simulate_particles(
    fields: nn.Module,
    x_0: torch.Tensor,
    tau: torch.Tensor | Sequence[float],
    *,
    log_w_0: torch.Tensor | None = None,
    method: str = "dopri5",
    rtol: float = 1e-5,
    atol: float = 1e-5,
    step_size: float | None = None,
    adjoint: bool = False,
) -> ParticleTrajectory:
    """Integrate the particles x_0: (n, d) with log-weights log_w_0: (n,) (default 0) through the normalised
    times tau: (K,) (increasing, in [0, 1], tau[0] the time of x_0).

    method: a core adaptive method ("dopri5", ...) or "rk4" with `step_size`. Gradients flow to the fields'
    parameters unless the caller wraps the call in `torch.no_grad()`.
    """
    tau = torch.as_tensor(tau, dtype=x_0.dtype, device=x_0.device)
    if log_w_0 is None:
        log_w_0 = torch.zeros(x_0.shape[0], dtype=x_0.dtype, device=x_0.device)
    z_0 = torch.cat([x_0, log_w_0[:, None].to(x_0.dtype)], dim=1)
    options = {"step_size": step_size} if step_size is not None else None
    sol = solve_ode_adaptive(
        AugmentedField(fields), z_0, tau, method=method, rtol=rtol, atol=atol, adjoint=adjoint, options=options
    )
    return ParticleTrajectory(tau=tau, x=sol.states[..., :-1], log_w=sol.states[..., -1], nfe=sol.nfe)
