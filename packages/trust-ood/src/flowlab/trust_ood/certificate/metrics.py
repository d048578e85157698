"""Detection metrics: AUROC, accuracy/FPR at a threshold, relative L1 error (correlations are the core's).

Convention: a trust score is higher for more trusted (in-distribution) samples; OOD is the positive class and is
flagged when score < threshold.
"""

from __future__ import annotations

import torch

from flowlab.core.metrics import rankdata

__all__ = ["acc_fpr_at_threshold", "auroc", "relative_l1"]


def _vec(x, name: str) -> torch.Tensor:
    v = torch.as_tensor(x, dtype=torch.float64).flatten()
    if v.numel() < 1 or not bool(torch.isfinite(v).all()):
        raise ValueError(f"{name}: expected a non-empty set of finite values")
    return v


def auroc(scores_id: torch.Tensor, scores_ood: torch.Tensor) -> float:
    """P(score_ood < score_id) + P(tie) / 2: the area under the ROC of flagging low trust scores as OOD."""
    a, b = _vec(scores_id, "scores_id"), _vec(scores_ood, "scores_ood")
    ranks = rankdata(torch.cat([a, b]))
    u = ranks[: a.numel()].sum() - a.numel() * (a.numel() + 1) / 2  # pairs with id above ood
    return float(u / (a.numel() * b.numel()))


def acc_fpr_at_threshold(scores_id: torch.Tensor, scores_ood: torch.Tensor, threshold: float) -> tuple[float, float]:
    """(balanced accuracy, false-positive rate) of the rule score < threshold => OOD: accuracy is the mean of the ID
    and OOD hit rates, FPR the fraction of ID samples flagged."""
    a, b = _vec(scores_id, "scores_id"), _vec(scores_ood, "scores_ood")
    fpr = float((a < threshold).double().mean())
    tpr = float((b < threshold).double().mean())
    return 0.5 * (1 - fpr + tpr), fpr


def relative_l1(prediction: torch.Tensor, target: torch.Tensor, *, floor: float = 0.0) -> torch.Tensor:
    """Per-sample ||pred - y||_1 / max(||y||_1, floor) over all but the batch dimension -> (B,)."""
    if prediction.shape != target.shape:
        raise ValueError(f"prediction: expected shape {tuple(target.shape)}, got {tuple(prediction.shape)}")
    num = (prediction - target).abs().flatten(1).sum(1)
    return num / target.abs().flatten(1).sum(1).clamp_min(floor)
