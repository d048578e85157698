"""k-NN-ball precision / recall (Kynkaanniemi et al. 2019) and density / coverage (Naeem et al. 2020)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.couplings import cost_matrix
from flowlab.core.metrics.frechet import metric_dtype
from flowlab.core.validation import check_tensor

__all__ = ["PRDC", "precision_recall_knn"]


@dataclass(frozen=True)
class PRDC:
    """precision: share of fake points inside the real k-NN manifold; recall: share of real points inside the
    fake manifold; density: mean number of real balls holding a fake point, divided by k; coverage: share of
    real balls holding at least one fake point."""

    precision: float
    recall: float
    density: float
    coverage: float


def _kth_neighbour_sq(x: torch.Tensor, k: int, block: int) -> torch.Tensor:
    """Squared distance from each point to its k-th nearest other point: (N, D) -> (N,)."""
    out = [
        cost_matrix(x[s : s + block], x).topk(k + 1, dim=1, largest=False).values[:, k]
        for s in range(0, x.shape[0], block)
    ]
    return torch.cat(out)


def precision_recall_knn(real: torch.Tensor, fake: torch.Tensor, *, k: int = 3, block: int = 1024) -> PRDC:
    """real: (N, ...), fake: (M, ...) features (flattened) -> PRDC.

    A point lies in the ball of x_i when its distance is <= the distance from x_i to its k-th nearest
    neighbour in x_i's own set. Computed in float64, in blocks of `block` fake points (memory O(block * N)).
    """
    check_tensor(real, "real")
    check_tensor(fake, "fake")
    if real.shape[1:] != fake.shape[1:]:
        raise ValueError(f"fake: expected feature shape {tuple(real.shape[1:])} like real, got {tuple(fake.shape[1:])}")
    if not isinstance(k, int) or not 1 <= k < min(real.shape[0], fake.shape[0]):
        raise ValueError(f"k: expected 1 <= k < min(N, M) = {min(real.shape[0], fake.shape[0])}, got {k!r}")
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"block: expected a positive integer, got {block!r}")
    dtype = metric_dtype(real.device)
    with torch.no_grad():
        r, f = real.detach().flatten(1).to(dtype), fake.detach().flatten(1).to(dtype)
        radius_r, radius_f = _kth_neighbour_sq(r, k, block), _kth_neighbour_sq(f, k, block)
        in_real_balls = torch.zeros((), dtype=torch.long, device=r.device)
        ball_hits = torch.zeros((), dtype=torch.long, device=r.device)
        covered = torch.zeros(r.shape[0], dtype=torch.bool, device=r.device)
        recalled = torch.zeros(r.shape[0], dtype=torch.bool, device=r.device)
        for s in range(0, f.shape[0], block):
            sq = cost_matrix(f[s : s + block], r)  # (b, N)
            inside = sq <= radius_r[None, :]
            in_real_balls += inside.any(1).sum()
            ball_hits += inside.sum()
            covered |= inside.any(0)
            recalled |= (sq <= radius_f[s : s + block, None]).any(0)
    n, m = r.shape[0], f.shape[0]
    return PRDC(
        precision=float(in_real_balls) / m,
        recall=float(recalled.sum()) / n,
        density=float(ball_hits) / (k * m),
        coverage=float(covered.sum()) / n,
    )
