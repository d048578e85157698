"""Flat space R^d as a `Manifold`: the reference case every manifold algorithm must reduce to."""

from __future__ import annotations

import math

import torch

from flowlab.core.distributions import randn
from flowlab.core.manifolds.base import Manifold, check_count

__all__ = ["Euclidean"]


class Euclidean(Manifold):
    """R^d with the standard metric; exp_x(u) = x + u, log_x(y) = y - x. Base distribution: N(0, I).

    Points and tangent vectors: (B, d).
    """

    def __init__(self, d: int) -> None:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d: expected a positive int dimension, got {d!r}")
        self.dim = self.ambient_dim = d

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """x + u: (B, d), (B, d) -> (B, d)."""
        return x + u

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """y - x: (B, d), (B, d) -> (B, d)."""
        return y - x

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Identity: every point of R^d lies on the manifold."""
        return x

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Identity: every vector is tangent."""
        return u

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Euclidean dot product: (B, d), (B, d) -> (B,)."""
        return (u * v).sum(-1)

    def dist(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Euclidean distance ||y - x||: (B, d), (B, d) -> (B,)."""
        return (y - x).norm(dim=-1)

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Identity: all tangent spaces are R^d, so u is returned unchanged."""
        return u

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Every finite point belongs: (B,)."""
        return torch.isfinite(x).all(dim=-1)

    def random_base(self, n: int, *, generator: torch.Generator | None = None, device=None, dtype=None) -> torch.Tensor:
        """N(0, I) draws: (n, d)."""
        return randn((check_count(n), self.dim), generator=generator, device=device, dtype=dtype)

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """log N(x; 0, I): (B, d) -> (B,)"""
        self.check_point(x, "x")
        return -0.5 * x.pow(2).sum(-1) - 0.5 * self.dim * math.log(2 * math.pi)

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """The zero vector: (d,)."""
        return torch.zeros(self.dim, device=device, dtype=dtype)

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Identity (the standard basis is orthonormal at 0): (B, d) -> (B, d)."""
        return v

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Identity, the inverse of `origin_frame`: (B, d) -> (B, d)."""
        return u

    def exp_log_det(self, r: torch.Tensor) -> torch.Tensor:
        """Zeros shaped like r: exp is a translation, so its Jacobian determinant is 1."""
        return torch.zeros_like(r)
