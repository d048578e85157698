"""Planar geometry shared by the environment features and the social-force baseline: ego frames and the closest
point of a pedestrian to each annotated box (a quadrilateral in metres)."""

from __future__ import annotations

import torch

__all__ = ["closest_points_on_boxes", "ego_frames", "to_ego", "unit"]


def unit(v: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """v: (..., D) -> v / |v|, and 0 where |v| < eps."""
    n = v.norm(dim=-1, keepdim=True)
    return torch.where(n > eps, v / n.clamp_min(eps), torch.zeros_like(v))


def ego_frames(heading: torch.Tensor, fallback: torch.Tensor | None = None) -> torch.Tensor:
    """Rotation matrices whose rows are the ego axes (forward = heading, left = heading turned by +90 degrees).

    heading: (N, 2); where it vanishes, `fallback: (N, 2)` (then the world x axis) gives the direction.
    Returns R: (N, 2, 2) with R @ v the ego coordinates of a world vector v and R^T @ u the way back. Every
    feature expressed in these frames is invariant under rotations and translations of the whole scene.
    """
    f = unit(heading)
    if fallback is not None:
        f = torch.where(f.norm(dim=-1, keepdim=True) > 0, f, unit(fallback))
    x_axis = torch.tensor([1.0, 0.0], dtype=f.dtype, device=f.device).expand_as(f)
    f = torch.where(f.norm(dim=-1, keepdim=True) > 0, f, x_axis)
    left = torch.stack([-f[:, 1], f[:, 0]], dim=-1)
    return torch.stack([f, left], dim=1)


def to_ego(v: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """World vectors v: (N, ..., 2) in the frames R: (N, 2, 2) -> (N, ..., 2)."""
    if v.dim() == 2:
        return torch.einsum("nij,nj->ni", R, v)
    return torch.einsum("nij,nkj->nki", R, v.flatten(1, -2)).reshape(v.shape)


def closest_points_on_boxes(points: torch.Tensor, corners: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Closest point of each box outline to each point, and whether the point lies inside the box.

    points: (N, 2), corners: (M, 4, 2) (a convex quadrilateral, corners in order) -> (closest (N, M, 2),
    inside (N, M) bool). Inside a box the closest outline point is returned too (the way out).
    """
    a = corners  # (M, 4, 2)
    b = corners.roll(-1, dims=1)
    ab = b - a  # (M, 4, 2)
    ap = points[:, None, None, :] - a[None]  # (N, M, 4, 2)
    s = ((ap * ab).sum(-1) / ab.pow(2).sum(-1).clamp_min(1e-12)).clamp(0, 1)
    cand = a[None] + s[..., None] * ab[None]  # (N, M, 4, 2)
    d = (cand - points[:, None, None, :]).norm(dim=-1)
    best = d.argmin(dim=-1)  # (N, M)
    closest = torch.gather(cand, 2, best[..., None, None].expand(-1, -1, 1, 2)).squeeze(2)
    cross = ab[None, :, :, 0] * ap[..., 1] - ab[None, :, :, 1] * ap[..., 0]  # (N, M, 4)
    inside = (cross >= 0).all(-1) | (cross <= 0).all(-1)
    return closest, inside
