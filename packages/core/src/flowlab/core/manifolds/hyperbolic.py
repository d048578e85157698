"""Hyperbolic space of curvature -c in two models: the Poincare ball and the Lorentz hyperboloid."""

from __future__ import annotations

import math

import torch

from flowlab.core.distributions import Generators
from flowlab.core.manifolds.base import Manifold, artanh_over, asinh_over, log_sinh_over, sinh_over, tanh_over
from flowlab.core.manifolds.wrapped import WrappedNormal

__all__ = ["Lorentz", "PoincareBall", "lorentz_to_poincare", "poincare_to_lorentz"]

#: `PoincareBall.projx` keeps sqrt(c) ||x|| <= 1 - BALL_EPS
BALL_EPS = 1e-5


def _check_hyperbolic_args(d: int, c: float, base_scale: float) -> None:
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ValueError(f"d: expected a positive int dimension, got {d!r}")
    if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
        raise ValueError(f"c: expected a positive curvature magnitude, got {c!r}")
    if not (isinstance(base_scale, (int, float)) and math.isfinite(base_scale) and base_scale > 0):
        raise ValueError(f"base_scale: expected a positive standard deviation, got {base_scale!r}")


def _dot(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (u * v).sum(-1, keepdim=True)


def poincare_to_lorentz(x: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """Isometry ball -> hyperboloid: (B, d) -> (B, d+1), y = (1 + c|x|^2, 2 sqrt(c) x) / (sqrt(c) (1 - c|x|^2))."""
    sq = c * _dot(x, x)
    return torch.cat([1 + sq, 2 * math.sqrt(c) * x], dim=-1) / (math.sqrt(c) * (1 - sq))


def lorentz_to_poincare(y: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """Inverse isometry hyperboloid -> ball: (B, d+1) -> (B, d), x = y_{1:} / (1 + sqrt(c) y_0)."""
    return y[..., 1:] / (1 + math.sqrt(c) * y[..., :1])


class PoincareBall(Manifold):
    """The Poincare ball {x in R^d: c ||x||^2 < 1} with metric lambda_x^2 <.,.>, lambda_x = 2 / (1 - c ||x||^2).

    Moebius addition x (+) y, exp_x(u) = x (+) tanh(sqrt(c) lambda_x ||u|| / 2) u / (sqrt(c) ||u||),
    log_x(y) = 2 / (sqrt(c) lambda_x) artanh(sqrt(c) ||m||) m / ||m|| with m = (-x) (+) y,
    dist = 2 / sqrt(c) artanh(sqrt(c) ||(-x) (+) y||). `projx` clips sqrt(c) ||x|| to 1 - 1e-5; precision degrades
    near the boundary (use float64). Base distribution: `WrappedNormal` at 0 with scale `base_scale`.
    Points and tangent vectors: (B, d). `belongs`: sqrt(c) ||x|| < 1 - atol (atol = 0: strictly inside).
    """

    atol = 0.0

    def __init__(self, d: int, c: float = 1.0, *, base_scale: float = 1.0) -> None:
        _check_hyperbolic_args(d, c, base_scale)
        self.dim = self.ambient_dim = d
        self.c = float(c)
        self.base_scale = float(base_scale)

    def __repr__(self) -> str:
        return f"PoincareBall({self.dim}, c={self.c})"

    def lambda_x(self, x: torch.Tensor) -> torch.Tensor:
        """Conformal factor 2 / (1 - c ||x||^2): (B, d) -> (B, 1)"""
        return 2 / (1 - self.c * _dot(x, x)).clamp_min(torch.finfo(x.dtype).eps)

    def mobius_add(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x (+) y: (B, d), (B, d) -> (B, d)"""
        c = self.c
        xy, x2, y2 = _dot(x, y), _dot(x, x), _dot(y, y)
        num = (1 + 2 * c * xy + c * y2) * x + (1 - c * x2) * y
        return num / (1 + 2 * c * xy + c * c * x2 * y2).clamp_min(torch.finfo(x.dtype).tiny)

    def gyration(self, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """gyr[a, b] w = -(a (+) b) (+) (a (+) (b (+) w)), in closed form (linear in w)."""
        c = self.c
        ab, aw, bw = _dot(a, b), _dot(a, w), _dot(b, w)
        a2, b2 = _dot(a, a), _dot(b, b)
        k_a = -c * c * aw * b2 + c * bw + 2 * c * c * ab * bw
        k_b = -c * c * bw * a2 - c * aw
        den = 1 + 2 * c * ab + c * c * a2 * b2
        return w + 2 * (k_a * a + k_b * b) / den.clamp_min(torch.finfo(w.dtype).tiny)

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """x (+) tanh(sqrt(c) lambda_x ||u|| / 2) u / (sqrt(c) ||u||), then `projx`: (B, d), (B, d) -> (B, d)."""
        lam = self.lambda_x(x)
        a = math.sqrt(self.c) * lam * u.norm(dim=-1, keepdim=True) / 2
        return self.projx(self.mobius_add(x, tanh_over(a) * lam / 2 * u))

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """2 / (sqrt(c) lambda_x) artanh(sqrt(c) ||m||) m / ||m|| with m = (-x) (+) y: (B, d), (B, d) -> (B, d)."""
        m = self.mobius_add(-x, y)
        z = (math.sqrt(self.c) * m.norm(dim=-1, keepdim=True)).clamp_max(1 - torch.finfo(x.dtype).eps)
        return 2 / self.lambda_x(x) * artanh_over(z) * m

    def dist(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """2 / sqrt(c) artanh(sqrt(c) ||(-x) (+) y||), without building `logmap`: (B, d), (B, d) -> (B,)."""
        z = math.sqrt(self.c) * self.mobius_add(-x, y).norm(dim=-1)
        return 2 / math.sqrt(self.c) * torch.atanh(z.clamp_max(1 - torch.finfo(x.dtype).eps))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Radially clips points to sqrt(c) ||x|| <= 1 - 1e-5: (B, d) -> (B, d)."""
        limit = (1 - BALL_EPS) / math.sqrt(self.c)
        n = x.norm(dim=-1, keepdim=True)
        return torch.where(n > limit, x * (limit / n.clamp_min(limit)), x)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Identity: the ball is open in R^d, so every vector is tangent."""
        return u

    def at_boundary(self, x: torch.Tensor) -> torch.Tensor:
        """Points at the `projx` limit sqrt(c) ||x|| = 1 − 1e-5 (hyperbolic radius ≈ 12.2 / sqrt(c)), to float
        precision."""
        limit = (1 - BALL_EPS) * (1 - 4 * torch.finfo(x.dtype).eps)
        return math.sqrt(self.c) * x.norm(dim=-1) >= limit

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Conformal inner product lambda_x^2 <u, v>: (B, d) -> (B,)."""
        return self.lambda_x(x).squeeze(-1) ** 2 * (u * v).sum(-1)

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Parallel transport along the geodesic: lambda_x / lambda_y gyr[y, -x] u."""
        return self.lambda_x(x) / self.lambda_x(y) * self.gyration(y, -x, u)

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): sqrt(c) ||x|| < 1 - atol."""
        tol = self.atol if atol is None else atol
        return math.sqrt(self.c) * x.norm(dim=-1) < 1 - tol

    def to_lorentz(self, x: torch.Tensor) -> torch.Tensor:
        """(B, d) -> (B, d+1) on `Lorentz(d, c)`."""
        return poincare_to_lorentz(x, self.c)

    def from_lorentz(self, y: torch.Tensor) -> torch.Tensor:
        """(B, d+1) on `Lorentz(d, c)` -> (B, d)."""
        return lorentz_to_poincare(y, self.c)

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """The centre 0 of the ball: (d,)."""
        return torch.zeros(self.dim, device=device, dtype=dtype)

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Orthonormal coordinates v: (B, d) -> tangent vectors v / 2 at 0 (lambda_0 = 2): (B, d)."""
        return v / 2  # lambda_0 = 2

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Inverse of `origin_frame`, 2 u: (B, d) -> (B, d)."""
        return 2 * u

    def exp_log_det(self, r: torch.Tensor) -> torch.Tensor:
        """(d - 1) log(sinh(sqrt(c) r) / (sqrt(c) r))"""
        return (self.dim - 1) * log_sinh_over(math.sqrt(self.c) * r)

    def random_base(self, n: int, *, generator: Generators = None, device=None, dtype=None) -> torch.Tensor:
        """Wrapped normal at 0 with scale `base_scale`: (n, d)."""
        return self._base(device, dtype).sample(n, generator=generator)

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Wrapped-normal log-density w.r.t. the Riemannian volume: (B, n) -> (B,)"""
        self.check_point(x, "x")
        return self._base(x.device, x.dtype).log_prob(x)

    def _base(self, device, dtype) -> WrappedNormal:
        return WrappedNormal(self, self.origin(device=device, dtype=dtype), self.base_scale)


class Lorentz(Manifold):
    """The hyperboloid {y in R^(d+1): <y, y>_L = -1/c, y_0 > 0}, <u, v>_L = -u_0 v_0 + sum_i u_i v_i.

    exp_y(u) = cosh(sqrt(c) ||u||_L) y + sinh(sqrt(c) ||u||_L) u / (sqrt(c) ||u||_L); log via
    u = y' + c <y, y'>_L y (the tangent part of y') and the angle asinh(sqrt(c) ||u||_L). Points and tangent vectors:
    (B, d+1). `belongs`: y_0 > 0 and |c <y, y>_L + 1| <= atol c y_0^2 (relative: coordinates grow like e^dist).
    Base distribution: `WrappedNormal` at the origin (1/sqrt(c), 0, ..., 0) with scale `base_scale`.
    """

    atol = 1e-4

    def __init__(self, d: int, c: float = 1.0, *, base_scale: float = 1.0) -> None:
        _check_hyperbolic_args(d, c, base_scale)
        self.dim = d
        self.ambient_dim = d + 1
        self.c = float(c)
        self.base_scale = float(base_scale)

    def __repr__(self) -> str:
        return f"Lorentz({self.dim}, c={self.c})"

    @staticmethod
    def minkowski(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """<u, v>_L: (B, d+1), (B, d+1) -> (B, 1)"""
        return _dot(u, v) - 2 * u[..., :1] * v[..., :1]

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """cosh(sqrt(c) ||u||_L) x + sinh(sqrt(c) ||u||_L) u / (sqrt(c) ||u||_L), then `projx`: (B, d+1) -> (B, d+1)."""
        n = math.sqrt(self.c) * self.minkowski(u, u).clamp_min(0).sqrt()
        return self.projx(torch.cosh(n) * x + sinh_over(n) * u)

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The tangent part u = y + c <x, y>_L x of y, rescaled to length dist(x, y): (B, d+1), (B, d+1) -> (B, d+1)."""
        u = y + self.c * self.minkowski(x, y) * x
        s = math.sqrt(self.c) * self.minkowski(u, u).clamp_min(0).sqrt()  # sinh(sqrt(c) dist)
        return asinh_over(s) * u

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Keeps the space part and recomputes x_0 = sqrt(1/c + ||space||^2): (B, d+1) -> (B, d+1)."""
        space = x[..., 1:]
        return torch.cat([(1 / self.c + _dot(space, space)).sqrt(), space], dim=-1)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Minkowski-orthogonal projection onto T_x, u + c <x, u>_L x: (B, d+1) -> (B, d+1)."""
        return u + self.c * self.minkowski(x, u) * x

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The Minkowski product <u, v>_L: (B, d+1), (B, d+1) -> (B,)."""
        return self.minkowski(u, v).squeeze(-1)

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Parallel transport along the geodesic: u + c <y, u>_L / (1 - c <x, y>_L) (x + y)."""
        k = self.c * self.minkowski(y, u) / (1 - self.c * self.minkowski(x, y))
        return u + k * (x + y)

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): x_0 > 0 and |c <x, x>_L + 1| <= atol c x_0^2."""
        tol = self.atol if atol is None else atol
        x0 = x[..., 0]
        err = (self.c * self.minkowski(x, x).squeeze(-1) + 1).abs()
        return (x0 > 0) & (err <= tol * self.c * x0 * x0)

    def to_poincare(self, y: torch.Tensor) -> torch.Tensor:
        """(B, d+1) -> (B, d) on `PoincareBall(d, c)`."""
        return lorentz_to_poincare(y, self.c)

    def from_poincare(self, x: torch.Tensor) -> torch.Tensor:
        """(B, d) on `PoincareBall(d, c)` -> (B, d+1)."""
        return poincare_to_lorentz(x, self.c)

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """(1/sqrt(c), 0, ..., 0): (d+1,)."""
        o = torch.zeros(self.ambient_dim, device=device, dtype=dtype)
        o[0] = 1 / math.sqrt(self.c)
        return o

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Orthonormal coordinates v: (B, d) -> tangent vectors (0, v) at the origin: (B, d+1)."""
        return torch.nn.functional.pad(v, (1, 0))

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Drops the time coordinate, the inverse of `origin_frame`: (B, d+1) -> (B, d)."""
        return u[..., 1:]

    def exp_log_det(self, r: torch.Tensor) -> torch.Tensor:
        """(d - 1) log(sinh(sqrt(c) r) / (sqrt(c) r))"""
        return (self.dim - 1) * log_sinh_over(math.sqrt(self.c) * r)

    def random_base(self, n: int, *, generator: Generators = None, device=None, dtype=None) -> torch.Tensor:
        """Wrapped normal at the origin with scale `base_scale`: (n, d+1)."""
        return self._base(device, dtype).sample(n, generator=generator)

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Wrapped-normal log-density w.r.t. the Riemannian volume: (B, n) -> (B,)"""
        self.check_point(x, "x")
        return self._base(x.device, x.dtype).log_prob(x)

    def _base(self, device, dtype) -> WrappedNormal:
        return WrappedNormal(self, self.origin(device=device, dtype=dtype), self.base_scale)
