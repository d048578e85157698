"""The `Manifold` interface every geometric piece of the core is written against (Euclidean is the special case)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch

#: below this argument the ratio helpers switch to their Taylor series (accurate to ~1e-18 there)
_TAYLOR = 1e-3


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

    def at_boundary(self, x: torch.Tensor) -> torch.Tensor:
        """Bool mask (B,): which points `projx` has pinned to a boundary at infinite distance (a flow that carries
        them there has left the manifold). All False on manifolds without such a boundary (the default)."""
        return torch.zeros(x.shape[:-1], dtype=torch.bool, device=x.device)

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
    def random_base(self, n: int, *, generator: torch.Generator | None = None, device=None, dtype=None) -> torch.Tensor:
        """n draws from the manifold's base (source) distribution: (n, ambient_dim)."""

    @abstractmethod
    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Log-density of the base distribution w.r.t. the Riemannian volume: (B, n) -> (B,)"""

    # -- compact manifolds: uniform distribution ------------------------------------------------------------------

    def random_uniform(
        self, n: int, *, generator: torch.Generator | None = None, device=None, dtype=None
    ) -> torch.Tensor:
        """n draws from the uniform distribution (w.r.t. the Riemannian volume): (n, ambient_dim). Compact only."""
        raise NotImplementedError(f"{self!r} is not compact: it has no uniform distribution")

    def log_volume(self) -> float:
        """log of the total Riemannian volume (the uniform log-density is -log_volume()). Compact only."""
        raise NotImplementedError(f"{self!r} is not compact: its volume is infinite")

    # -- hooks for `WrappedNormal` (homogeneous manifolds) -----------------------------------------------------------

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """The reference point the wrapped normal's tangent Gaussian lives at: (ambient_dim,)."""
        raise NotImplementedError(f"{self!r} has no origin / wrapped normal")

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Orthonormal coordinates v: (B, dim) of T_origin -> ambient tangent vectors at the origin (B, ambient_dim)."""
        raise NotImplementedError(f"{self!r} has no origin / wrapped normal")

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Inverse of `origin_frame`: ambient tangent vectors at the origin (B, ambient_dim) -> (B, dim)."""
        raise NotImplementedError(f"{self!r} has no origin / wrapped normal")

    def exp_log_det(self, r: torch.Tensor) -> torch.Tensor:
        """log |det d exp_p| at a tangent vector of norm r (any shape); a function of r alone on constant curvature."""
        raise NotImplementedError(f"{self!r} has no closed-form exp Jacobian")

    def wrapped_log_prob(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Log-density (w.r.t. the Riemannian volume) of exp_p(P w), w ~ N(0, diag(scale^2)) in origin coordinates,
        evaluated at the point whose (transported) log-coordinates are v: (B, dim); scale: (dim,) -> (B,).

        Default: exp is a diffeomorphism (Euclidean, hyperbolic), so log N(v) - log |det d exp| at ||v||.
        Compact manifolds override this to sum over every preimage (windings).
        """
        return diag_normal_log_prob(v, scale) - self.exp_log_det(v.norm(dim=-1))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dim})"


# -- numerically safe helpers shared by the manifolds ------------------------------------------------------------------


def diag_normal_log_prob(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """log N(v; 0, diag(scale^2)): v: (..., d), scale: (d,) -> (...)"""
    z = v / scale
    return -0.5 * z.pow(2).sum(-1) - scale.log().sum() - 0.5 * v.shape[-1] * math.log(2 * math.pi)


def _series(x: torch.Tensor, exact, c2: float, c4: float) -> torch.Tensor:
    """exact(x) / x, with the series 1 + c2 x^2 + c4 x^4 near 0 (gradient-safe: no 0/0 on either branch)."""
    small = x.abs() < _TAYLOR
    safe = torch.where(small, torch.ones_like(x), x)
    x2 = x * x
    return torch.where(small, 1 + c2 * x2 + c4 * x2 * x2, exact(safe) / safe)


def sin_over(x: torch.Tensor) -> torch.Tensor:
    """sin(x) / x"""
    return _series(x, torch.sin, -1 / 6, 1 / 120)


def sinh_over(x: torch.Tensor) -> torch.Tensor:
    """sinh(x) / x"""
    return _series(x, torch.sinh, 1 / 6, 1 / 120)


def tanh_over(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) / x"""
    return _series(x, torch.tanh, -1 / 3, 2 / 15)


def artanh_over(x: torch.Tensor) -> torch.Tensor:
    """artanh(x) / x for |x| < 1"""
    return _series(x, torch.atanh, 1 / 3, 1 / 5)


def asinh_over(x: torch.Tensor) -> torch.Tensor:
    """asinh(x) / x"""
    return _series(x, torch.asinh, -1 / 6, 3 / 40)


def log_sinh_over(x: torch.Tensor) -> torch.Tensor:
    """log(sinh(x) / x) for x >= 0, without overflow for large x."""
    large = x > 1.0
    safe = torch.where(large, x, torch.ones_like(x))
    big = safe + torch.log1p(-torch.exp(-2 * safe)) - math.log(2) - safe.log()
    return torch.where(large, big, sinh_over(torch.where(large, torch.zeros_like(x), x)).log())


def log_sphere_volume(d: int) -> float:
    """log of the volume of the unit sphere S^d in R^(d+1): 2 pi^((d+1)/2) / Gamma((d+1)/2)."""
    return math.log(2) + 0.5 * (d + 1) * math.log(math.pi) - math.lgamma(0.5 * (d + 1))


def check_count(n: int, name: str = "n") -> int:
    """Check a sample count is a positive int."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{name}: expected a positive int number of samples, got {n!r}")
    return n
