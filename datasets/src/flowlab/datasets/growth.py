"""A growing Gaussian mixture observed at two times: unequal growth per component plus a small drift, in any
dimension, with the true growth known. The high-dimensional test case of unbalanced (WFR) snapshot models."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["GrowthMixture", "growth_mixture"]


@dataclass(frozen=True)
class GrowthMixture:
    """Cells of a growing mixture. x: (N, d) positions; time: (N,) in {0, 1}; component: (N,) the mixture
    component of each cell; growth: (K,) each component's true growth rate ln(factor) per unit time (constant in
    time and space); factors: (K,) each component's count ratio n_1 / n_0."""

    x: torch.Tensor
    time: torch.Tensor
    component: torch.Tensor
    growth: torch.Tensor
    factors: torch.Tensor


def growth_mixture(
    dim: int,
    n0: int,
    *,
    components: int = 3,
    mass_ratio: float = 2.8,
    spread: float = 3.0,
    drift: float = 1.0,
    sigma: float = 0.3,
    generator: torch.Generator | None = None,
    law: torch.Generator | None = None,
) -> GrowthMixture:
    """`n0` cells at time 0 split evenly over `components` isotropic Gaussians (std `sigma` per axis) whose means lie
    at distance `spread` from the origin in random directions; at time 1 each component's mean has moved by `drift`
    in a random direction and its count has grown by a factor proportional to K, K - 1, ..., 1, scaled so that the
    total count grows by `mass_ratio` (3 components, 2.8: factors 4.2, 2.8, 1.4). The law (the mean and drift
    directions) is drawn from `law` (default: `generator`, first), the cells from `generator`: the same `law` seed
    with another cell seed gives fresh cells of the same data set, to score a model on cells it was not fitted to."""
    if dim < 1 or n0 < components or components < 1:
        raise ValueError(f"dim, n0, components: expected dim >= 1 and n0 >= components >= 1, got {dim}, {n0}, "
                         f"{components}")  # fmt: skip
    for name, value in (("mass_ratio", mass_ratio), ("spread", spread), ("sigma", sigma)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: expected a positive number, got {value!r}")
    if not (math.isfinite(drift) and drift >= 0):
        raise ValueError(f"drift: expected a non-negative number, got {drift!r}")
    g = generator

    def directions() -> torch.Tensor:
        u = torch.randn(components, dim, generator=law or g, dtype=torch.float64)
        return u / u.norm(dim=1, keepdim=True)

    means = spread * directions()
    moved = means + drift * directions()
    shares = torch.arange(components, 0, -1, dtype=torch.float64)
    factors = mass_ratio * components * shares / shares.sum()
    counts0 = torch.full((components,), n0 // components, dtype=torch.long)
    counts0[: n0 % components] += 1
    counts1 = (counts0.to(torch.float64) * factors).round().to(torch.long).clamp_min(1)
    xs, ts, ks = [], [], []
    for t, centres, counts in ((0.0, means, counts0), (1.0, moved, counts1)):
        for k in range(components):
            n = int(counts[k])
            xs.append(centres[k] + sigma * torch.randn(n, dim, generator=g, dtype=torch.float64))
            ts.append(torch.full((n,), t, dtype=torch.float64))
            ks.append(torch.full((n,), k, dtype=torch.long))
    return GrowthMixture(
        x=torch.cat(xs).float(),
        time=torch.cat(ts),
        component=torch.cat(ks),
        growth=(counts1.to(torch.float64) / counts0).log(),
        factors=counts1.to(torch.float64) / counts0,
    )
