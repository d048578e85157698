"""Evaluation: return-distribution accuracy against Monte-Carlo ground truth (normalised returns of a policy on a
control task are the package's: `envs.scores`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.metrics import wasserstein

__all__ = ["DistributionScores", "distribution_scores"]


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
