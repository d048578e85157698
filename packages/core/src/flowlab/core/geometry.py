"""Point-cloud geometry for batches of padded molecules or particle sets: centring and rigid alignment.

Point sets are `x: (B, N, D)` (D = 3 for molecules, 2 for planar toys); `mask: (B, N)` bool marks the present
points of padded sets (absent points are ignored and come back as 0 from `mean_free`), and `weights: (B, N)`
non-negative per-point weights (atom masses, confidences). Only shapes and dtypes are checked, so these functions
never synchronise with the device and can sit inside a training or sampling loop.

- `mean_free(x, mask)`: subtract the centre of the present points.
- `kabsch(x, y, ...)`: the proper rotation R (det +1) and translation t minimising sum_i w_i |R x_i + t - y_i|^2
  (Kabsch 1976, with the sign fix that turns a reflection into the best rotation), solved by an SVD in float64.
- `kabsch_align(x, y, ...)`: x moved onto y by that rigid motion; `aligned_rmsd(x, y, ...)`: the RMSD after it.
"""

from __future__ import annotations

import torch

__all__ = ["aligned_rmsd", "kabsch", "kabsch_align", "mean_free"]


def _check_points(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected a floating tensor of shape (B, N, D), got {shape}")


def _check_per_point(v: torch.Tensor | None, name: str, x: torch.Tensor, *, boolean: bool) -> None:
    """Raise ValueError naming `name` unless v is None or a (B, N) tensor of x's first two sizes (bool or float)."""
    ok = isinstance(v, torch.Tensor) and v.shape == x.shape[:2]
    ok = ok and (v.dtype == torch.bool if boolean else v.is_floating_point())
    if v is not None and not ok:
        got = f"{v.dtype} {tuple(v.shape)}" if isinstance(v, torch.Tensor) else type(v).__name__
        kind = "bool" if boolean else "floating"
        raise ValueError(f"{name}: expected a {kind} tensor of shape {tuple(x.shape[:2])} (B, N), got {got}")


def _point_weights(x: torch.Tensor, mask: torch.Tensor | None, weights: torch.Tensor | None) -> torch.Tensor | None:
    """mask, weights: (B, N) or None -> their product (B, N) in x's dtype, or None when both are None."""
    _check_per_point(mask, "mask", x, boolean=True)
    _check_per_point(weights, "weights", x, boolean=False)
    if mask is None and weights is None:
        return None
    w = torch.ones(x.shape[:2], dtype=x.dtype, device=x.device) if weights is None else weights.to(x.dtype)
    return w if mask is None else w * mask.to(x.dtype)


def _centre(x: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
    """x: (B, N, D), w: (B, N) or None -> the (weighted) mean point (B, 1, D)."""
    if w is None:
        return x.mean(1, keepdim=True)
    total = w.sum(1).clamp_min(torch.finfo(w.dtype).tiny)
    return ((w[..., None] * x).sum(1) / total[:, None])[:, None]


def mean_free(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """x: (B, N, D), mask: (B, N) bool or None -> x minus the mean of its present points, (B, N, D).

    Absent points (mask False) are 0 in the result; a set with no present point is all 0.
    """
    _check_points(x, "x")
    w = _point_weights(x, mask, None)
    centred = x - _centre(x, w)
    return centred if w is None else centred * w[..., None]


def _check_pair(x: torch.Tensor, y: torch.Tensor) -> None:
    _check_points(x, "x")
    _check_points(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x, y: expected the same shape (B, N, D), got {tuple(x.shape)} and {tuple(y.shape)}")


def kabsch(
    x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rigid motion of x onto y: x, y: (B, N, D) -> (R: (B, D, D), t: (B, D)), in x's dtype.

    R is a proper rotation (det R = +1) and t a translation minimising sum_i w_i |R x_i + t - y_i|^2 over the
    present points (w = weights * mask, 1 where not given); `kabsch_align` applies it as x @ R^T + t.
    """
    _check_pair(x, y)
    w = _point_weights(x, mask, weights)
    x64, y64 = x.double(), y.double()
    w64 = None if w is None else w.double()
    cx, cy = _centre(x64, w64), _centre(y64, w64)
    xc, yc = x64 - cx, y64 - cy
    if w64 is not None:
        xc = xc * w64[..., None]
    u, _, vh = torch.linalg.svd(xc.transpose(1, 2) @ yc)  # H = sum_i w_i xc_i yc_i^T = U S V^T
    # R = V diag(1, ..., 1, d) U^T with d = sign det(V U^T): the best proper rotation even when H's is a reflection
    d = torch.sign(torch.linalg.det(vh.transpose(1, 2) @ u.transpose(1, 2)))
    flip = torch.ones(x.shape[0], x.shape[2], dtype=torch.float64, device=x.device)
    flip[:, -1] = d
    rotation = vh.transpose(1, 2) @ (flip[..., None] * u.transpose(1, 2))
    translation = cy[:, 0] - (rotation @ cx[:, 0, :, None])[..., 0]
    return rotation.to(x.dtype), translation.to(x.dtype)


def _apply(x: torch.Tensor, rotation: torch.Tensor, translation: torch.Tensor) -> torch.Tensor:
    """x: (B, N, D) -> x @ R^T + t, (B, N, D)."""
    return x @ rotation.transpose(1, 2) + translation[:, None]


def kabsch_align(
    x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """x, y: (B, N, D) -> x rigidly moved onto y by `kabsch(x, y, mask, weights)`, (B, N, D).

    Every point of x moves, absent ones included (they do not steer the fit); mask them out afterwards if needed.
    """
    rotation, translation = kabsch(x, y, mask, weights)
    return _apply(x, rotation, translation)


def aligned_rmsd(
    x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """x, y: (B, N, D) -> (B,) root-mean-square deviation of the present points after `kabsch_align(x, y)`.

    With weights it is sqrt(sum_i w_i |R x_i + t - y_i|^2 / sum_i w_i).
    """
    aligned = kabsch_align(x, y, mask, weights)
    sq = (aligned - y).square().sum(-1)  # (B, N)
    w = _point_weights(x, mask, weights)
    if w is None:
        return sq.mean(1).sqrt()
    return ((w * sq).sum(1) / w.sum(1).clamp_min(torch.finfo(w.dtype).tiny)).sqrt()
