"""Maximum mean discrepancy with Gaussian kernels on Euclidean or geodesic distances."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from flowlab.core.couplings import cost_matrix
from flowlab.core.manifolds.base import Manifold
from flowlab.core.validation import check_tensor

__all__ = ["median_bandwidth", "mmd"]


def _check_samples(x: torch.Tensor, y: torch.Tensor) -> None:
    check_tensor(x, "x")
    check_tensor(y, "y")
    if x.shape[1:] != y.shape[1:]:
        raise ValueError(f"x, y: event shapes differ, {tuple(x.shape[1:])} vs {tuple(y.shape[1:])}")
    for name, v in (("x", x), ("y", y)):
        if v.shape[0] < 2:
            raise ValueError(f"{name}: expected at least 2 samples, got {v.shape[0]}")


def _cost(manifold: Manifold | None):
    if manifold is not None and not isinstance(manifold, Manifold):
        raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold or None, got {type(manifold).__name__}")
    return "sqeuclidean" if manifold is None else manifold


def _weights(w: torch.Tensor | None, n: int, like: torch.Tensor, name: str) -> torch.Tensor:
    """Probability weights (n,): uniform when None, else checked (non-negative, positive sum) and normalised."""
    if w is None:
        return torch.full((n,), 1.0 / n, device=like.device, dtype=like.dtype)
    check_tensor(w, name)
    if w.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) (one weight per sample), got {tuple(w.shape)}")
    if bool((w < 0).any()) or not bool(w.sum() > 0):
        raise ValueError(f"{name}: weights must be non-negative with a positive total")
    w = w.to(like.dtype)
    return w / w.sum()


def median_bandwidth(x: torch.Tensor, y: torch.Tensor, *, manifold: Manifold | None = None) -> float:
    """The median heuristic: median distance between distinct points of the pooled sample x ∪ y.

    x: (N, ...), y: (M, ...); with a manifold, geodesic distances.
    """
    _check_samples(x, y)
    with torch.no_grad():
        z = torch.cat([x, y]).detach()
        sq = cost_matrix(z, z, _cost(manifold))
        i, j = torch.triu_indices(len(z), len(z), offset=1, device=z.device)
        return float(sq[i, j].median().sqrt())


def mmd(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    bandwidth: float | Sequence[float] | None = None,
    manifold: Manifold | None = None,
    unbiased: bool = True,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
) -> torch.Tensor:
    """Squared MMD between samples x: (N, ...) and y: (M, ...) -> 0-d tensor (differentiable).

    Kernel k(u, v) = sum_h exp(-d(u, v)^2 / (2 h^2)) over the bandwidths h (one number, several for a
    multi-scale kernel, or None for the median heuristic); d is Euclidean on flattened events, or geodesic on
    `manifold`. unbiased=True drops the diagonal of the within-sample terms (the U-statistic: it can be
    slightly negative); False is the V-statistic. Optional sample weights a: (N,), b: (M,) (normalised; the
    unbiased form uses sum_{i != j} a_i a_j k_ij / (1 - sum_i a_i^2), which reduces to the usual 1/(N(N-1))
    for uniform weights).
    """
    _check_samples(x, y)
    cost = _cost(manifold)
    if bandwidth is None:
        bandwidths = [median_bandwidth(x, y, manifold=manifold)]
    else:
        bandwidths = [bandwidth] if isinstance(bandwidth, int | float) else list(bandwidth)
    if not bandwidths or not all(isinstance(h, int | float) and h > 0 for h in bandwidths):
        raise ValueError(f"bandwidth: expected positive number(s) or None, got {bandwidth!r}")
    wa, wb = _weights(a, x.shape[0], x, "a"), _weights(b, y.shape[0], y, "b")

    def kernel(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        sq = cost_matrix(u, v, cost)
        return sum(torch.exp(-sq / (2 * h * h)) for h in bandwidths)

    def within(u: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        K = kernel(u, u)
        total = w @ K @ w
        if not unbiased:
            return total
        w2 = w.square()
        return (total - w2 @ K.diagonal()) / (1 - w2.sum())

    return within(x, wa) + within(y, wb) - 2 * (wa @ kernel(x, y) @ wb)
