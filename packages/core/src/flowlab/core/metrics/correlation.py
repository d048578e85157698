"""Rank and linear correlation of two samples: average-tie ranks, Pearson's r and Spearman's rho."""

from __future__ import annotations

import math

import torch

__all__ = ["pearson", "rankdata", "spearman"]


def _vec(x: torch.Tensor, name: str) -> torch.Tensor:
    v = torch.as_tensor(x, dtype=torch.float64).flatten()
    if v.numel() < 1 or not bool(torch.isfinite(v).all()):
        raise ValueError(f"{name}: expected a non-empty set of finite values")
    return v


def rankdata(x: torch.Tensor) -> torch.Tensor:
    """x: (N,) (flattened) -> (N,) float64 1-based ranks, ties given their average rank (scipy's "average")."""
    v = _vec(x, "x")
    order = torch.argsort(v)
    sorted_v = v[order]
    ranks = torch.empty_like(v)
    ranks[order] = torch.arange(1, v.numel() + 1, dtype=torch.float64)
    uniq, inverse = torch.unique(sorted_v, return_inverse=True)
    mean_rank = torch.zeros(uniq.numel(), dtype=torch.float64).index_add_(0, inverse, ranks[order])
    counts = torch.bincount(inverse, minlength=uniq.numel()).to(torch.float64)
    out = torch.empty_like(v)
    out[order] = (mean_rank / counts)[inverse]
    return out


def pearson(x: torch.Tensor, y: torch.Tensor) -> float:
    """Pearson's r of x, y: (N,) with N >= 2, in float64; nan when either is constant."""
    a, b = _vec(x, "x"), _vec(y, "y")
    if a.shape != b.shape or a.numel() < 2:
        raise ValueError(f"x, y: expected equal lengths >= 2, got {a.numel()}, {b.numel()}")
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman's rho: Pearson's r of the average-tie ranks; nan when either sample is constant."""
    return pearson(rankdata(x), rankdata(y))
