"""Sampling Wright-Fisher diffusion: the reverse SDE on the simplex with the model's score, then a draw of the
clean letters from the model's posterior at tau_min.

The forward process (in tau) has drift (psi / 2)(pi - x) and diffusion matrix Sigma = diag(x) - x x^T, and it is
reversible with respect to Dirichlet(psi pi); so its time reversal has drift (psi / 2)(pi - x) + Sigma grad log R,
the stationary factor cancelling. With the model's ratio score w_c E[m | x, c] / x_c along e_c,
Sigma grad log R = w * E - x sum_c w_c E_c: bounded, no division by a coordinate. The noise is
G(x) z = sqrt(x) z - x (sqrt(x) . z), G G^T = Sigma on the simplex. The grid is geometric in tau (uniform steps in
paper time would jump by tau = 2.5 per step near t_max), mapped to core time for `core.solvers.solve_sde`.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from flowlab.biology_dynamics.wright_fisher.likelihood import lineage_posterior
from flowlab.biology_dynamics.wright_fisher.objective import NoisyBatch, WrightFisherELBO
from flowlab.core.distributions import multinomial
from flowlab.core.solvers import solve_sde

__all__ = ["sample_wright_fisher", "simplex_noise"]


def simplex_noise(x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """G(x) z with G(x) G(x)^T = diag(x) - x x^T for x on the simplex: (..., K) -> (..., K)."""
    root = x.clamp_min(0).sqrt()
    return root * z - x * (root * z).sum(-1, keepdim=True)


@torch.no_grad()
def sample_wright_fisher(
    objective: WrightFisherELBO,
    model: Any,
    n: int,
    length: int,
    *,
    steps: int = 200,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    cond: dict[str, Any] | None = None,
    return_simplex: bool = False,
) -> torch.Tensor:
    """n sequences of `length` letters: (n, length) int64 (or, with `return_simplex`, the final (n, length, K)
    float64 simplex states at tau_min). Starts from the stationary Dirichlet(psi pi) at t_max."""
    path = objective.path
    if not (isinstance(n, int) and n > 0 and isinstance(length, int) and length > 0):
        raise ValueError(f"n, length: expected positive ints, got {n!r}, {length!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps: expected an int >= 1, got {steps!r}")
    device = torch.device(device)
    tau_max = float(path.tau(torch.zeros(1))[0])
    taus = torch.logspace(math.log10(tau_max), math.log10(objective.tau_min), steps + 1, dtype=torch.float64)
    grid = (1 - (-torch.expm1(-path.psi * taus / 2)) / path.t_max).clamp(0, objective.t_hi).to(device)
    grid[0], grid[-1] = 0.0, objective.t_hi
    pi = 1 / path.letters

    def posterior(x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        tau = path.tau(t).clamp(objective.tau_min, tau_max)
        batch = NoisyBatch(t=t, tau=tau, beta=torch.zeros_like(t), x_t=x, q=objective.table.probs(tau))
        log_r, lineages = lineage_posterior(x, batch.q, path.psi)
        w = torch.softmax(objective.logits(model, batch, cond) + log_r, dim=-1)
        return w, lineages, tau

    def speed(t: torch.Tensor) -> torch.Tensor:
        """|d tau / dt| = t_max (2 / psi) / (1 - s), s = (1 - t) t_max: (B,)."""
        return path.t_max * (2 / path.psi) / (1 - (1 - t) * path.t_max)

    def drift(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        w, lineages, _ = posterior(x, t)
        pull = w * lineages
        reverse = path.psi / 2 * (pi - x) + pull - x * pull.sum(-1, keepdim=True)
        return speed(t)[:, None, None] * reverse

    x = path.simplex.random_dirichlet(
        n, torch.full((n, length, path.letters), path.psi * pi, dtype=torch.float64, device=device), generator=generator
    )
    x = solve_sde(
        drift,
        lambda t: speed(t).sqrt(),
        x,
        grid,
        generator=generator,
        noise_map=simplex_noise,
        projection=path.simplex.projx,
    )
    if return_simplex:
        return x
    w, _, _ = posterior(x, torch.full((n,), objective.t_hi, dtype=torch.float64, device=device))
    return multinomial(w.reshape(-1, path.letters).float(), 1, generator=generator).reshape(n, length)
