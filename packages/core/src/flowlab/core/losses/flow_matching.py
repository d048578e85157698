"""Flow-matching regression losses: Euclidean, Riemannian, and the conditional bridge loss.

Per-sample losses are squared norms summed over the event dimensions, ||prediction - target||^2: (B,);
`weight` (B,) multiplies them and `reduction` is "mean" (over the batch), "sum" or "none" (the (B,) values).
"""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.distributions import sample_times
from flowlab.core.manifolds.base import Manifold
from flowlab.core.paths.base import PathSample
from flowlab.core.validation import check_choice, check_same_batch, check_tensor

__all__ = ["bridge_loss", "flow_matching_loss", "riemannian_flow_matching_loss"]

REDUCTIONS = ("mean", "sum", "none")


def reduce_loss(per_sample: torch.Tensor, *, weight: torch.Tensor | None, reduction: str) -> torch.Tensor:
    """Weight (B,) and reduce per-sample losses (B,) to a scalar ("mean", "sum") or keep them ("none")."""
    check_choice(reduction, REDUCTIONS, "reduction")
    if weight is not None:
        check_tensor(weight, "weight")
        if weight.shape != per_sample.shape:
            raise ValueError(
                f"weight: expected shape {tuple(per_sample.shape)} (one weight per sample), got {tuple(weight.shape)}"
            )
        per_sample = per_sample * weight
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    return per_sample


def check_prediction(prediction: torch.Tensor, target: torch.Tensor, name: str = "prediction") -> None:
    """Raise ValueError naming `name` unless `prediction` is a tensor shaped like `target`."""
    if not isinstance(prediction, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor, got {type(prediction).__name__}")
    if prediction.shape != target.shape:
        raise ValueError(
            f"{name}: expected shape {tuple(target.shape)} (like the target), got {tuple(prediction.shape)}"
        )


def flow_matching_loss(
    prediction: torch.Tensor,
    sample: PathSample | torch.Tensor,
    *,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """||v_theta - dx_t||^2 per sample.

    prediction: (B, ...) the model's velocity at (sample.x_t, sample.t); sample: a PathSample (target sample.dx_t)
    or the target velocity itself (B, ...); weight: (B,) -> scalar, or (B,) with reduction="none".
    """
    target = sample.dx_t if isinstance(sample, PathSample) else sample
    if not isinstance(target, torch.Tensor):
        raise ValueError(f"sample: expected a PathSample or a target tensor, got {type(sample).__name__}")
    check_prediction(prediction, target)
    return reduce_loss((prediction - target).square().flatten(1).sum(1), weight=weight, reduction=reduction)


def riemannian_flow_matching_loss(
    v: torch.Tensor,
    sample: PathSample,
    manifold: Manifold,
    *,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """||v - dx_t||_g^2 at x_t, the difference projected onto the tangent space T_{x_t} M first.

    v: (B, n) the model's velocity at (sample.x_t, sample.t); sample: a PathSample on `manifold` (e.g. from
    GeodesicPath); weight: (B,).
    """
    if not isinstance(manifold, Manifold):
        raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold, got {type(manifold).__name__}")
    if not isinstance(sample, PathSample):
        raise ValueError(f"sample: expected a PathSample, got {type(sample).__name__}")
    check_prediction(v, sample.dx_t, "v")
    diff = manifold.proju(sample.x_t, v - sample.dx_t)
    return reduce_loss(manifold.inner(sample.x_t, diff, diff), weight=weight, reduction=reduction)


def bridge_loss(
    model: Any,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    path: Any,
    generator: torch.Generator | None = None,
    t: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Conditional bridge matching from an observation y (t=0) to clean data x (t=1).

    Draws t ~ U[0, 1] (unless given) and the path noise from `generator`, samples `path` (an
    AugmentedBridgePath or BridgePath) between y and x, and regresses `model(x=x_t, t=t, y=y, **cond)` on the
    path's target (AugmentedBridgePath: the drift (x - x_t) / (1 - t)). x, y: (B, ...); t: (B,).
    """
    check_tensor(x, "x")
    check_tensor(y, "y")
    batch = check_same_batch(x=x, y=y)
    if not hasattr(path, "sample"):
        raise ValueError(f"path: expected a bridge path with a `sample` method, got {type(path).__name__}")
    if t is None:
        t = sample_times(batch, generator=generator, device=x.device, dtype=x.dtype)
    s = path.sample(y, x, t, generator=generator)
    return flow_matching_loss(model(x=s.x_t, t=s.t, y=y, **cond), s, weight=weight, reduction=reduction)
