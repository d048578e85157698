"""Energy distance (Szekely & Rizzo): 2 E d(X, Y) - E d(X, X') - E d(Y, Y')."""

from __future__ import annotations

import torch

from flowlab.core.couplings import cost_matrix
from flowlab.core.manifolds.base import Manifold
from flowlab.core.metrics.mmd import _check_samples, _cost

__all__ = ["energy_distance"]


def energy_distance(
    x: torch.Tensor, y: torch.Tensor, *, manifold: Manifold | None = None, unbiased: bool = True
) -> torch.Tensor:
    """Energy distance between samples x: (N, ...) and y: (M, ...) -> 0-d tensor (differentiable).

    d is Euclidean on flattened events, or geodesic on `manifold`. unbiased=True averages the within-sample
    distances over distinct pairs (1/(N(N-1)); can be slightly negative), False over all N^2 pairs (the
    V-statistic, always >= 0).
    """
    _check_samples(x, y)
    cost = _cost(manifold)

    def dist(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        sq = cost_matrix(u, v, cost)
        return sq.clamp_min(torch.finfo(sq.dtype).tiny).sqrt()

    def within(u: torch.Tensor) -> torch.Tensor:
        n = u.shape[0]
        D = dist(u, u)
        total = D.sum() - D.diagonal().sum()
        return total / (n * (n - 1) if unbiased else n * n)

    return 2 * dist(x, y).mean() - within(x) - within(y)
