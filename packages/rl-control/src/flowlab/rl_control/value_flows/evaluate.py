"""Evaluation: return-distribution accuracy against Monte-Carlo ground truth, rank correlation of the spread with the
true standard deviation, and normalised returns of a policy on a control task."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.metrics import wasserstein

__all__ = ["DistributionScores", "distribution_scores", "spearman"]


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman rank correlation of two 1-D tensors (average ranks for ties)."""
    if x.shape != y.shape or x.dim() != 1 or x.numel() < 2:
        raise ValueError(f"x, y: expected two 1-D tensors of one length >= 2, got {tuple(x.shape)}, {tuple(y.shape)}")

    def ranks(v: torch.Tensor) -> torch.Tensor:
        v = v.double()
        order = v.argsort()
        r = torch.empty_like(v)
        r[order] = torch.arange(len(v), dtype=torch.float64)
        _, inv = torch.unique(v, return_inverse=True)  # average ranks over ties
        sums = torch.zeros(int(inv.max()) + 1, dtype=torch.float64).index_add_(0, inv, r)
        counts = torch.bincount(inv).double()
        return (sums / counts)[inv]

    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = (rx.square().sum() * ry.square().sum()).sqrt()
    return float((rx * ry).sum() / denom) if denom > 0 else 0.0


@dataclass(frozen=True)
class DistributionScores:
    """Mean over the grid of W1(model samples, MC returns) and |mean error|."""

    w1: float
    mean_abs_error: float


def distribution_scores(samples: torch.Tensor, truth: torch.Tensor) -> DistributionScores:
    """samples: (G, n) model return samples, truth: (G, m) Monte-Carlo returns per grid point."""
    if samples.dim() != 2 or truth.dim() != 2 or samples.shape[0] != truth.shape[0]:
        raise ValueError(
            f"samples, truth: expected (G, n) and (G, m), got {tuple(samples.shape)}, {tuple(truth.shape)}"
        )
    samples, truth = samples.double(), truth.double()
    w1 = torch.stack([wasserstein(s[:, None], t[:, None], p=1) for s, t in zip(samples, truth, strict=True)])
    mae = (samples.mean(1) - truth.mean(1)).abs()
    return DistributionScores(float(w1.mean()), float(mae.mean()))
