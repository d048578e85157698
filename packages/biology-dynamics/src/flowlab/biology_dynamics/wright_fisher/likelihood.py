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


#: rows are summed in up to this many groups of similar support (sorted by their last weighted column), each over
#: its own columns: a batch mixing small and large times no longer pays the widest row's support for every row
_GROUPS = 8


def _groups(q: torch.Tensor) -> list[tuple[torch.Tensor, int, int]]:
    """(rows, lo, hi) per group: the row indices and the columns [lo, hi) that some row of the group weights; q (B, M)
    with B = 0 has no groups."""
    if q.shape[0] == 0:
        return []
    weighted = q > _NEGLIGIBLE
    cols = torch.arange(q.shape[1], device=q.device)
    hi = torch.where(weighted, cols, -1).amax(-1)  # (B,)
    lo = torch.where(weighted, cols, q.shape[1]).amin(-1)
    order = hi.argsort()
    out = []
    for rows in order.tensor_split(min(_GROUPS, q.shape[0])):
        if len(rows):
            out.append((rows, int(lo[rows].min()), int(hi[rows].max()) + 1))
    return out


def _sums(x: torch.Tensor, q: torch.Tensor, psi: float, *, mean: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log R_b(x) and (with `mean`) E[m | x, b], each (B, L, K) float64: the terms
    log q_m + log (psi)_m / (a)_m + m log x_b, a = psi / K, summed in log space over each row group's support."""
    a = psi / x.shape[-1]
    log_x = x.to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny).log()
    log_r = torch.empty_like(log_x)
    lineages = torch.empty_like(log_x) if mean else None
    for rows, lo, hi in _groups(q):
        m = torch.arange(lo, hi, dtype=torch.float64, device=q.device)
        log_coef = torch.lgamma(psi + m) - math.lgamma(psi) - torch.lgamma(a + m) + math.lgamma(a)
        terms = q[rows, lo:hi].log()[:, None, None, :] + log_coef + m * log_x[rows, ..., None]
        top = terms.amax(-1, keepdim=True).detach()
        e = torch.exp(terms - top)
        total = e.sum(-1)
        log_r = log_r.index_put((rows,), top[..., 0] + total.log())
        if mean:
            lineages = lineages.index_put((rows,), (e * m).sum(-1) / total)
    return log_r, lineages


def log_ratio(x: torch.Tensor, q: torch.Tensor, psi: float) -> torch.Tensor:
    """log R_b(x) for every position and letter b: x (B, L, K), q (B, M) lineage law per sequence -> (B, L, K)
    float64 (differentiable in x)."""
    _check(x, q)
    return _sums(x, q, psi, mean=False)[0]


def lineage_posterior(x: torch.Tensor, q: torch.Tensor, psi: float) -> tuple[torch.Tensor, torch.Tensor]:
    """log R_b(x) and E[m | x, x_0 = b], each (B, L, K) float64; the ratio's score along e_b is their second
    over x_b."""
    _check(x, q)
    return _sums(x, q, psi, mean=True)
