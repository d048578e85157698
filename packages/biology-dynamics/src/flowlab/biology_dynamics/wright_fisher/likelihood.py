"""The Wright-Fisher transition density through its lineage mixture, per position and candidate clean letter:

    p(x_tau | x_0 = b) = sum_m q_m(tau) Dirichlet(x_tau; psi pi + m e_b), so
    R_b(x) = p(x_tau | x_0 = b) / Dirichlet(x_tau; psi pi) = sum_m q_m(tau) (psi)_(m) / (a)_(m) x_b^m,  a = psi pi_b,

a power series with non-negative terms (no cancellation), summed in log space. Its score along e_b is
d log R_b / dx_b = E[m | x, b] / x_b, the posterior mean number of lineages over x_b. The stationary factor
Dirichlet(x; psi pi) is shared by every letter, so it cancels from posteriors over x_0, from the ELBO's score
difference and from the reverse drift: everything downstream needs only log R and this score.
"""

from __future__ import annotations

import math

import torch

__all__ = ["lineage_posterior", "log_ratio"]


def _check(x: torch.Tensor, q: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError("x: expected (B, L, K) points of the simplex")
    if not isinstance(q, torch.Tensor) or q.dim() != 2 or q.shape[0] != x.shape[0]:
        raise ValueError(f"q: expected ({x.shape[0]}, M) lineage probabilities, one row per sequence")


#: lineage counts whose probability is below this in every row are left out of the sums (their terms are below
#: 1e-30 even where the coefficient (psi)_m / (a)_m reaches 1e50, psi = 100 and m = 50)
_NEGLIGIBLE = 1e-80


def _support(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The columns of q some row gives weight: q restricted to them, and their lineage counts m."""
    kept = (q > _NEGLIGIBLE).any(0).nonzero().squeeze(-1)
    lo, hi = int(kept.min()), int(kept.max()) + 1
    return q[:, lo:hi], torch.arange(lo, hi, dtype=torch.float64, device=q.device)


def _log_terms(x: torch.Tensor, q: torch.Tensor, psi: float) -> tuple[torch.Tensor, torch.Tensor]:
    """log of q_m (psi)_m / (a)_m x_b^m over the support of q: (B, L, K, M'), a = psi / K, and the m (M',)."""
    a = psi / x.shape[-1]
    q, m = _support(q)
    log_coef = torch.lgamma(psi + m) - math.lgamma(psi) - torch.lgamma(a + m) + math.lgamma(a)
    log_x = x.to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny).log()
    return q.log()[:, None, None, :] + log_coef + m * log_x[..., None], m


def log_ratio(x: torch.Tensor, q: torch.Tensor, psi: float) -> torch.Tensor:
    """log R_b(x) for every position and letter b: x (B, L, K), q (B, M) lineage law per sequence -> (B, L, K)
    float64 (differentiable in x)."""
    _check(x, q)
    return torch.logsumexp(_log_terms(x, q, psi)[0], dim=-1)


def lineage_posterior(x: torch.Tensor, q: torch.Tensor, psi: float) -> tuple[torch.Tensor, torch.Tensor]:
    """log R_b(x) and E[m | x, x_0 = b], each (B, L, K) float64; the ratio's score along e_b is their second
    over x_b."""
    _check(x, q)
    terms, m = _log_terms(x, q, psi)
    log_r = torch.logsumexp(terms, dim=-1)
    return log_r, (torch.softmax(terms, dim=-1) * m).sum(-1)
