"""Small statistics for reports: a percentile bootstrap interval of a mean and a linear-probe accuracy (how much
of a label a representation holds linearly)."""

from __future__ import annotations

import torch

from flowlab.core.validation import check_tensor

__all__ = ["bootstrap_interval", "linear_probe_accuracy"]


def bootstrap_interval(
    values: torch.Tensor, *, level: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): the mean of values (N,) and its percentile bootstrap interval at `level` from `resamples`
    resamples with replacement drawn from `seed`."""
    check_tensor(values, "values")
    if values.dim() != 1 or values.numel() < 2:
        raise ValueError(f"values: expected a 1-d tensor of at least 2 values, got shape {tuple(values.shape)}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a value in (0, 1), got {level!r}")
    if not (isinstance(resamples, int) and resamples >= 10):
        raise ValueError(f"resamples: expected an integer >= 10, got {resamples!r}")
    v = values.detach().double().cpu()
    idx = torch.randint(0, v.numel(), (resamples, v.numel()), generator=torch.Generator().manual_seed(seed))
    means = v[idx].mean(1)
    tail = (1 - level) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64))
    return float(v.mean()), float(low), float(high)


def linear_probe_accuracy(
    train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor, test_y: torch.Tensor, *, c: float = 1.0
) -> float:
    """Test accuracy of an L2-regularised (inverse strength `c`) logistic regression on standardised features,
    fitted on train_x (N, D) with labels train_y (N,) and scored on test_x (M, D), test_y (M,)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    for name, x, y in (("train_x", train_x, train_y), ("test_x", test_x, test_y)):
        check_tensor(x, name)
        if x.dim() != 2 or y.shape != x.shape[:1]:
            raise ValueError(
                f"{name}: expected (N, D) features with (N,) labels, got {tuple(x.shape)}, {tuple(y.shape)}"
            )
    if train_x.shape[1] != test_x.shape[1]:
        raise ValueError(f"test_x: expected {train_x.shape[1]} features, got {test_x.shape[1]}")
    if len(torch.unique(train_y)) < 2:
        raise ValueError("train_y: expected at least two classes")
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
    probe.fit(train_x.detach().double().cpu().numpy(), train_y.cpu().numpy())
    return float(probe.score(test_x.detach().double().cpu().numpy(), test_y.cpu().numpy()))
