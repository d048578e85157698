"""Dirichlet flow matching (Stark et al. 2024): the conditional path p_t(x | x_0 = b) = Dirichlet(1 + a(t) e_b),
a(t) = t (alpha_max - 1), from the flat Dirichlet at t = 0 to Dirichlet(1, ..., alpha_max, ..., 1) at t = 1.

The conditional velocity u = C(x_b, a) a'(t) (e_b - x) keeps the Dirichlet family: x_b is Beta(1 + a, K - 1), and
continuity along e_b - x asks C p(x_b) (1 - x_b) = -d/da I_(x_b)(1 + a, K - 1), I the regularised incomplete beta
function. With d/da p(s) = p(s) (log s - E), E = psi(1 + a) - psi(K + a) (digamma), the derivative is an integral
of (log s - E) p(s) over [0, x] (or, negated, over [x, 1]), and dividing by p(x_b)(1 - x_b) inside the integral
leaves bounded integrands:

    x <= mean:  C = -x / (1 - x) int_0^1 (log(x v) - E) v^a ((1 - x v) / (1 - x))^(K - 2) dv   (v = w^2)
    x >  mean:  C = int_0^1 (log s - E) (s / x)^a (1 - v)^(K - 2) dv,   s = x + (1 - x) v

computed by Gauss-Legendre quadrature in float64, exact to quadrature error on any device.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from flowlab.biology_dynamics.wright_fisher.baselines.simplex_flow import SimplexFlow

__all__ = ["DirichletFM", "dirichlet_rate"]


@functools.lru_cache(maxsize=8)
def _legendre(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1]."""
    z, w = np.polynomial.legendre.leggauss(nodes)
    return (z + 1) / 2, w / 2


def dirichlet_rate(x_b: torch.Tensor, a: torch.Tensor, letters: int, *, nodes: int = 48) -> torch.Tensor:
    """C(x_b, a) >= 0 of the Dirichlet FM conditional velocity: x_b (...,) in (0, 1), a (...,) >= 0 -> (...,)
    float64. Each entry evaluates only its own branch's quadrature."""
    if letters < 2:
        raise ValueError(f"letters: expected >= 2, got {letters!r}")
    x = x_b.to(torch.float64).clamp(1e-12, 1 - 1e-12)
    a = a.to(torch.float64).expand_as(x).reshape(-1)
    x = x.reshape(-1)
    z_np, w_np = _legendre(nodes)
    z = torch.as_tensor(z_np, dtype=torch.float64, device=x.device)
    w = torch.as_tensor(w_np, dtype=torch.float64, device=x.device)
    e = torch.special.digamma(1 + a) - torch.special.digamma(letters + a)
    out = torch.empty_like(x)
    low = x <= (1 + a) / (letters + a)
    # x <= mean: v = u^2, dv = 2u du
    xl, al, el = x[low, None], a[low, None], e[low, None]
    log_v = 2 * torch.log(z)
    log_f = al * log_v + (letters - 2) * (torch.log1p(-xl * z**2) - torch.log1p(-xl))
    out[low] = -xl[:, 0] / (1 - xl[:, 0]) * ((torch.log(xl) + log_v - el) * torch.exp(log_f) * (2 * z * w)).sum(-1)
    # x > mean
    high = ~low
    xh, ah, eh = x[high, None], a[high, None], e[high, None]
    log_s = torch.log(xh + (1 - xh) * z)
    log_f = ah * (log_s - torch.log(xh)) + (letters - 2) * torch.log1p(-z)
    out[high] = ((log_s - eh) * torch.exp(log_f) * w).sum(-1)
    return out.reshape(x_b.shape)


class DirichletFM(SimplexFlow):
    """Dirichlet FM over `letters` letters with the path's top concentration `alpha_max` (8 in the paper)."""

    def __init__(self, letters: int, *, alpha_max: float = 8.0) -> None:
        if not alpha_max > 1:
            raise ValueError(f"alpha_max: expected > 1, got {alpha_max!r}")
        super().__init__(letters, t_hi=1.0)
        self.alpha_max = float(alpha_max)

    def __repr__(self) -> str:
        return f"DirichletFM(letters={self.letters}, alpha_max={self.alpha_max})"

    def noisy(self, x_0: torch.Tensor, t: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """Draws x_t ~ `Dirichlet(1 + t (alpha_max - 1) e_{x_0})`: x_0: (B, L) int64, t: (B,) -> (B, L, K) float64,
        clamped above 0."""
        a = t.to(torch.float64)[:, None, None] * (self.alpha_max - 1)
        alpha = 1 + a * torch.nn.functional.one_hot(x_0, self.letters).to(torch.float64)
        return self.simplex.random_dirichlet(x_0.shape[0], alpha, generator=generator).clamp_min(1e-12)

    def rates(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The Dirichlet FM rates at concentration `1 + t (alpha_max - 1)`, times `alpha_max - 1`:
        x: (B, L, K), t: (B,) -> (B, L, K)."""
        a = (t.to(torch.float64) * (self.alpha_max - 1))[:, None, None]
        return dirichlet_rate(x, a, self.letters) * (self.alpha_max - 1)
