"""The `Manifold` interface every geometric piece of the core is written against (Euclidean is the special case)."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch


class Manifold(ABC):
    """A Riemannian manifold with points stored in an ambient coordinate tensor `x: (B, ambient_dim)`.

    Tangent vectors at x share x's shape. `dim` is the intrinsic dimension (what a density is w.r.t.).
    """

    dim: int
    ambient_dim: int
    #: tolerance used by `check_point` to decide that a point lies on the manifold
    atol: float = 1e-4

    @abstractmethod
    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """exp_x(u): x, u: (B, n) -> (B, n)"""

    @abstractmethod
    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """log_x(y): x, y: (B, n) -> tangent at x (B, n)"""

    @abstractmethod
    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Nearest point on the manifold: (B, n) -> (B, n)."""

    @abstractmethod
    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Project an ambient vector u onto the tangent space at x: (B, n) -> (B, n)."""

    @abstractmethod
    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Riemannian inner product <u, v>_x: -> (B,)"""

    def norm(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """||u||_x: -> (B,)"""
        return self.inner(x, u, u).clamp_min(0).sqrt()

    def dist(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Geodesic distance: -> (B,)"""
        return self.norm(x, self.logmap(x, y))

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Transport a tangent vector u at x to y (projection transport unless overridden)."""
        return self.proju(y, u)

    @abstractmethod
    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): which points lie on the manifold within `atol`."""

    def check_point(self, x: torch.Tensor, name: str = "x") -> torch.Tensor:
        """Raise `ValueError` naming `name` when any point is off the manifold; return x."""
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[-1] != self.ambient_dim:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name}: expected points of shape (B, {self.ambient_dim}) on {self!r}, got {shape}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: contains NaN or inf values")
        ok = self.belongs(x)
        if not bool(ok.all()):
            bad = int((~ok).sum())
            raise ValueError(f"{name}: {bad} of {x.shape[0]} points are off {self!r} (tolerance {self.atol})")
        return x

    @abstractmethod
    def random_base(
        self, n: int, *, generator: torch.Generator | None = None, device=None, dtype=None
    ) -> torch.Tensor:
        """n draws from the manifold's base (source) distribution: (n, ambient_dim)."""

    @abstractmethod
    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Log-density of the base distribution w.r.t. the Riemannian volume: (B, n) -> (B,)"""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dim})"
