"""The ancestral-lineage law q_m(tau) tabulated once on a grid of dilated times, for training and sampling: the
series costs up to 0.2 s per time near tau = 0.1 (its mpmath cells), a batch needs a row per sample.

Rows at tau >= small_tau come from the series (`lineage_probs`); below, from the forward sampler's small-time
branch: Griffiths' normal approximation discretised the way the sampler rounds it (q_m = P(round(N) = m), the mass
below 0 on m = 0) at GRIFFITHS_TAU, carried to tau by the exact death process (`death_process_probs`), and
Griffiths' law itself at tau <= GRIFFITHS_TAU. So the table and `WrightFisherPath.sample` describe the same process.
Between grid points (geometric in tau) rows are interpolated linearly in log tau: with the default 320 points over
[0.01, 3.45], a mid-point row is within total variation 0.003 of the series at tau = 0.05 and 0.0012 at 0.1 (160
points: 0.012 and 0.005, about half the Griffiths error of 0.022 that the small-time branch removes); building it
costs about 2 s.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from flowlab.biology_dynamics.wright_fisher.ancestral import (
    GRIFFITHS_TAU,
    SMALL_TAU,
    death_process_probs,
    griffiths_moments,
    lineage_probs,
)
from flowlab.core.distributions import rand

__all__ = ["LineageTable", "griffiths_pmf", "griffiths_support", "lineage_table"]


def griffiths_pmf(tau: torch.Tensor, psi: float, m_max: int) -> torch.Tensor:
    """P(round(N(mean, var)) clipped at 0 = m), m = 0..m_max: tau (T,) -> (T, m_max + 1) float64."""
    mean, var = griffiths_moments(tau, psi)
    edges = torch.arange(m_max + 2, dtype=torch.float64) - 0.5
    cdf = torch.special.ndtr((edges[None] - mean[:, None]) / var.sqrt()[:, None])
    cdf[:, 0] = 0.0
    return cdf.diff(dim=-1)


def griffiths_support(tau: float, psi: float) -> int:
    """The largest lineage count worth tabulating at `tau`: Griffiths' mean plus 12 standard deviations."""
    mean, var = griffiths_moments(torch.tensor([tau], dtype=torch.float64), psi)
    return math.ceil(float(mean[0] + 12 * var[0].sqrt()))


class LineageTable:
    """q_m(tau) for m = 0..m_max on `points` geometric grid times in [tau_min, tau_max]: `probs(tau)` interpolates.

    m_max covers the Griffiths mean plus 12 standard deviations at tau_min (and the series' k_max above)."""

    def __init__(
        self,
        psi: float,
        tau_min: float,
        tau_max: float,
        *,
        points: int = 320,
        small_tau: float = SMALL_TAU,
        k_max: int = 80,
    ) -> None:
        if not (0 < tau_min < tau_max and math.isfinite(tau_max)):
            raise ValueError(f"tau_min, tau_max: expected 0 < tau_min < tau_max, got {tau_min!r}, {tau_max!r}")
        if not (isinstance(points, int) and points >= 2):
            raise ValueError(f"points: expected an int >= 2, got {points!r}")
        self.psi, self.tau_min, self.tau_max = float(psi), float(tau_min), float(tau_max)
        grid = torch.logspace(math.log10(tau_min), math.log10(tau_max), points, dtype=torch.float64)
        self.m_max = max(k_max, griffiths_support(tau_min, psi))
        rows = torch.zeros(points, self.m_max + 1, dtype=torch.float64)
        small = grid < small_tau
        direct, later = small & (grid <= GRIFFITHS_TAU), small & (grid > GRIFFITHS_TAU)
        if bool(direct.any()):
            rows[direct] = griffiths_pmf(grid[direct], psi, self.m_max)
        if bool(later.any()):
            at = torch.tensor([GRIFFITHS_TAU], dtype=torch.float64)
            start = griffiths_pmf(at, psi, griffiths_support(GRIFFITHS_TAU, psi))[0]
            carried = death_process_probs(start, grid[later] - GRIFFITHS_TAU, psi)[:, : self.m_max + 1]
            rows[later, : carried.shape[1]] = carried
        if bool((~small).any()):
            rows[~small, : k_max + 1] = lineage_probs(grid[~small], psi, k_max=k_max)
        self.log_grid = grid.log()
        self.rows = rows / rows.sum(-1, keepdim=True)

    def __repr__(self) -> str:
        return f"LineageTable(psi={self.psi:g}, tau=[{self.tau_min:g}, {self.tau_max:g}], m_max={self.m_max})"

    def probs(self, tau: torch.Tensor) -> torch.Tensor:
        """tau: (B,) in [tau_min, tau_max] -> q: (B, m_max + 1) float64 on tau's device."""
        if not isinstance(tau, torch.Tensor) or tau.dim() != 1:
            raise ValueError("tau: expected a 1-D tensor of dilated times")
        lo, hi = self.tau_min * (1 - 1e-9), self.tau_max * (1 + 1e-9)
        if not bool(torch.isfinite(tau).all()) or bool(((tau < lo) | (tau > hi)).any()):
            raise ValueError(f"tau: expected times in the table's range [{self.tau_min:g}, {self.tau_max:g}]")
        log_grid, rows = self.log_grid.to(tau.device), self.rows.to(tau.device)
        u = tau.to(torch.float64).log().clamp(log_grid[0], log_grid[-1])
        i = torch.searchsorted(log_grid, u).clamp(1, len(log_grid) - 1)
        w = ((u - log_grid[i - 1]) / (log_grid[i] - log_grid[i - 1]))[:, None]
        return (1 - w) * rows[i - 1] + w * rows[i]

    def sample(self, q: torch.Tensor, *, generator: torch.Generator, per_row: int = 1) -> torch.Tensor:
        """Inverse-CDF draws from rows of `probs`: q (B, M) -> (B, per_row) int64 lineage counts."""
        u = rand((q.shape[0], per_row), generator=generator, device=q.device, dtype=torch.float64)
        cdf = q.cumsum(-1)
        return torch.searchsorted(cdf, u * cdf[:, -1:]).clamp_max(q.shape[-1] - 1)


@lru_cache(maxsize=16)
def lineage_table(psi: float, tau_min: float, tau_max: float, points: int = 320) -> LineageTable:
    """A cached `LineageTable` (built once per process for each setting)."""
    return LineageTable(psi, tau_min, tau_max, points=points)
