"""The Wright-Fisher diffusion on the simplex with parent-independent mutation towards a uniform pi, run forward
from a clean letter x_0 (a vertex), sampled exactly: A ~ the ancestral-lineage law at the dilated time tau, then
x_tau ~ Dirichlet(psi pi + A e_{x_0}) (Jenkins & Spano 2017).

Times: paper time s in [0, t_max] (s = 0 clean) is core time t = 1 - s / t_max (t = 1 data, as everywhere in the
core). The dilation tau(s) = -(2 / psi) log(1 - s) makes the signal e^(-psi tau / 2) = 1 - s linear, since the
mean relaxes as E[x_tau | x_0 = b] = pi + e^(-psi tau / 2) (e_b - pi).
"""

from __future__ import annotations

import math

import torch

from flowlab.biology_dynamics.wright_fisher.ancestral import SMALL_TAU, lineage_probs, sample_lineages
from flowlab.core.manifolds import Simplex

__all__ = ["WrightFisherPath"]


class WrightFisherPath:
    """Exact forward draws of Wright-Fisher simplicial diffusion over an alphabet of `letters` (uniform pi), with
    mutation rate `psi` (default: letters) and largest paper time `t_max`."""

    def __init__(self, letters: int, *, psi: float | None = None, t_max: float = 0.999) -> None:
        if isinstance(letters, bool) or not isinstance(letters, int) or letters < 2:
            raise ValueError(f"letters: expected an alphabet size >= 2, got {letters!r}")
        psi = float(letters) if psi is None else psi
        if not (isinstance(psi, int | float) and math.isfinite(psi) and psi > 1):
            raise ValueError(f"psi: expected a mutation rate > 1, got {psi!r}")
        if not 0 < t_max < 1:
            raise ValueError(f"t_max: expected a paper time in (0, 1), got {t_max!r}")
        self.letters, self.psi, self.t_max = letters, float(psi), float(t_max)
        self.simplex = Simplex(letters)

    def __repr__(self) -> str:
        return f"WrightFisherPath(letters={self.letters}, psi={self.psi:g}, t_max={self.t_max:g})"

    def tau(self, t: torch.Tensor) -> torch.Tensor:
        """The dilated time of core time t in [0, 1): tau = -(2 / psi) log(1 - (1 - t) t_max), (B,) float64."""
        if not isinstance(t, torch.Tensor) or t.dim() != 1 or bool(((t < 0) | (t >= 1)).any()):
            raise ValueError("t: expected a 1-D tensor of core times in [0, 1) (t = 1 is the clean letter)")
        s = (1 - t.to(torch.float64)) * self.t_max
        return -(2 / self.psi) * torch.log1p(-s)

    def signal(self, t: torch.Tensor) -> torch.Tensor:
        """e^(-psi tau / 2) = 1 - s: the share of e_{x_0} - pi left in the mean, (B,) float64."""
        return 1 - (1 - t.to(torch.float64)) * self.t_max

    def sample(self, x_0: torch.Tensor, t: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """x_0: (B, L) int64 letters, t: (B,) core times in [0, 1) -> x_t: (B, L, letters) float64 on the simplex,
        one lineage count per sample and position."""
        if not isinstance(x_0, torch.Tensor) or x_0.dtype != torch.long or x_0.dim() != 2:
            raise ValueError("x_0: expected (B, L) int64 letters")
        if bool((x_0 < 0).any()) or bool((x_0 >= self.letters).any()):
            raise ValueError(f"x_0: expected letters in [0, {self.letters})")
        tau = self.tau(t)
        if tau.shape[0] != x_0.shape[0]:
            raise ValueError(f"t: expected {x_0.shape[0]} times (one per sequence), got {tau.shape[0]}")
        lineages = sample_lineages(tau.repeat_interleave(x_0.shape[1]), self.psi, generator=generator)
        return self.draw(x_0, lineages.reshape(x_0.shape), generator=generator)

    def draw(self, x_0: torch.Tensor, lineages: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """The second stage given the lineage counts: x_0, lineages (B, L) int64 -> x ~ Dirichlet(psi pi + lineages
        e_{x_0}), (B, L, letters) float64 on x_0's device."""
        alpha = torch.full((*x_0.shape, self.letters), self.psi / self.letters, dtype=torch.float64, device=x_0.device)
        alpha.scatter_add_(-1, x_0.unsqueeze(-1), lineages.unsqueeze(-1).to(alpha))
        return self.simplex.random_dirichlet(x_0.shape[0], alpha, generator=generator)

    def mean(self, b: int, t: torch.Tensor, *, k_max: int = 80) -> torch.Tensor:
        """E[x_t | x_0 = b] from the lineage law, sum_m q_m (psi pi + m e_b) / (psi + m): (B, letters) float64,
        for times with tau >= the series' range (SMALL_TAU)."""
        tau = self.tau(t)
        if bool((tau < SMALL_TAU).any()):
            raise ValueError(f"t: the lineage series needs tau >= {SMALL_TAU} (t <= {self._t_of(SMALL_TAU):.4f})")
        q = lineage_probs(tau, self.psi, k_max=k_max)
        m = torch.arange(q.shape[-1], dtype=torch.float64)
        off = (q * (self.psi / self.letters) / (self.psi + m)).sum(-1)
        on = (q * (self.psi / self.letters + m) / (self.psi + m)).sum(-1)
        out = off[:, None].repeat(1, self.letters)
        out[:, b] = on
        return out

    def _t_of(self, tau: float) -> float:
        return 1 - (1 - math.exp(-self.psi * tau / 2)) / self.t_max
