"""The probability simplex with the Fisher-Rao metric, through the sphere map x -> 2 sqrt(x)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from flowlab.core.distributions import Generators, rand, randn
from flowlab.core.manifolds.base import Manifold, check_count, log_sphere_volume
from flowlab.core.manifolds.sphere import Sphere

__all__ = ["Simplex"]

#: `Simplex.projx` clamps coordinates to at least this before renormalising
SIMPLEX_EPS = 1e-8


class Simplex(Manifold):
    """Delta^(K-1) = {x in R^K: x_i >= 0, sum x = 1} with the Fisher-Rao metric <u, v>_x = sum_i u_i v_i / x_i.

    x -> 2 sqrt(x) is an isometry onto the positive orthant of the radius-2 sphere, so geodesics, exp, log and
    transport go through the unit sphere s = sqrt(x): log_x(y) = 2 s * log^S_s(sqrt(y)), dist = 2 angle(s, sqrt(y)).
    A geodesic between two points stays in the simplex; `expmap` of a long tangent vector that leaves the orthant
    folds back (coordinates are squared). Tangent vectors sum to 0. Points: (B, K); intrinsic dimension K - 1.
    Base distribution: uniform for the Fisher-Rao volume, which is Dirichlet(1/2, ..., 1/2);
    the volume is |S^(K-1)| / 2. `belongs`: |sum x - 1| <= atol and x_i >= -atol.
    """

    atol = 1e-4

    def __init__(self, K: int) -> None:
        if isinstance(K, bool) or not isinstance(K, int) or K < 2:
            raise ValueError(f"K: expected an int number of categories >= 2, got {K!r}")
        self.dim = K - 1
        self.ambient_dim = K
        self._sphere = Sphere(K - 1)

    def __repr__(self) -> str:
        return f"Simplex({self.ambient_dim})"

    @staticmethod
    def to_sphere(x: torch.Tensor) -> torch.Tensor:
        """The Fisher-Rao isometry x -> 2 sqrt(x) onto the radius-2 sphere: (B, K) -> (B, K)."""
        return 2 * x.clamp_min(0).sqrt()

    @staticmethod
    def from_sphere(s: torch.Tensor) -> torch.Tensor:
        """Inverse of `to_sphere` (s on the radius-2 sphere): (B, K) -> (B, K)."""
        return s * s / 4

    @staticmethod
    def _root(x: torch.Tensor) -> torch.Tensor:
        return x.clamp_min(torch.finfo(x.dtype).tiny).sqrt()

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Sphere exp at sqrt(x) of u / (2 sqrt(x)), squared back and renormalised: (B, K), (B, K) -> (B, K)."""
        s = self._root(x)
        s_new = self._sphere.expmap(s, u / (2 * s))
        y = s_new * s_new
        return y / y.sum(-1, keepdim=True)

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Fisher-Rao log via the sphere: 2 sqrt(x) times the sphere log from sqrt(x) to sqrt(y): (B, K) -> (B, K)."""
        s = self._root(x)
        return 2 * s * self._sphere.logmap(s, self._root(y))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Coordinates <= 1e-8 become 1e-8 and the others are rescaled to make the sum 1 (idempotent)."""
        low = x <= SIMPLEX_EPS
        rest = torch.where(low, torch.zeros_like(x), x)
        room = 1 - SIMPLEX_EPS * low.sum(-1, keepdim=True).to(x.dtype)
        rest = rest * (room / rest.sum(-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny))
        return torch.where(low, torch.full_like(x, SIMPLEX_EPS), rest)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Fisher-Rao orthogonal projection onto {sum u = 0}: u - (sum u) x."""
        return u - u.sum(-1, keepdim=True) * x

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Fisher metric sum_i u_i v_i / x_i: (B, K), (B, K) -> (B,)."""
        return (u * v / x.clamp_min(torch.finfo(x.dtype).tiny)).sum(-1)

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Parallel transport along the Fisher-Rao geodesic (through the sphere)."""
        s, t = self._root(x), self._root(y)
        return 2 * t * self._sphere.transp(s, t, u / (2 * s))

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): |sum x - 1| <= atol and every coordinate >= -atol."""
        tol = self.atol if atol is None else atol
        return ((x.sum(-1) - 1).abs() <= tol) & (x >= -tol).all(dim=-1)

    def random_uniform(self, n: int, *, generator: Generators = None, device=None, dtype=None) -> torch.Tensor:
        """Fisher-Rao uniform draws, i.e. Dirichlet(1/2): squared normalised Gaussians, (n, K)."""
        z = randn((check_count(n), self.ambient_dim), generator=generator, device=device, dtype=dtype)
        z = z * z
        return z / z.sum(-1, keepdim=True)

    def log_volume(self) -> float:
        """log(|S^(K-1)| / 2) = log(pi^(K/2) / Gamma(K/2))"""
        return log_sphere_volume(self.dim) - math.log(2)

    def random_base(self, n: int, *, generator: Generators = None, device=None, dtype=None) -> torch.Tensor:
        """The Fisher-Rao uniform distribution (see `random_uniform`): (n, K)."""
        return self.random_uniform(n, generator=generator, device=device, dtype=dtype)

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Uniform log-density -log_volume(): (B, K) -> (B,)"""
        self.check_point(x, "x")
        return torch.full(x.shape[:1], -self.log_volume(), dtype=x.dtype, device=x.device)

    def random_dirichlet(
        self,
        n: int,
        alpha: float | Sequence[float] | torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        device=None,
        dtype=None,
    ) -> torch.Tensor:
        """n draws from Dirichlet(alpha), normalised Gamma draws.

        alpha: a scalar or (K,) -> (n, K) in `dtype`; or per-sample concentrations (n, ..., K), e.g. (B, L, K) per
        position, -> draws of alpha's shape, the Gamma draws and their normalisation in float64 (small
        concentrations put most of the mass within 1e-30 of the faces), returned in `dtype` (default alpha's)."""
        n = check_count(n)
        if isinstance(alpha, torch.Tensor) and alpha.dim() >= 2:
            a = self._concentrations(alpha, "alpha")
            if a.shape[0] != n:
                raise ValueError(f"alpha: expected per-sample concentrations with {n} rows (n), got {tuple(a.shape)}")
            g = _gamma(a.to(device=device or a.device, dtype=torch.float64), generator)
            return (g / g.sum(-1, keepdim=True)).to(dtype or alpha.dtype)
        a = self._alpha(alpha, device, dtype)
        g = _gamma(a.expand(n, -1), generator)
        return g / g.sum(-1, keepdim=True)

    def dirichlet_log_prob(self, x: torch.Tensor, alpha: float | Sequence[float] | torch.Tensor) -> torch.Tensor:
        """log-density of Dirichlet(alpha) w.r.t. the Fisher-Rao volume (= Lebesgue density * prod_i sqrt(x_i)).

        x: (B, K) or (B, ..., K) points; alpha: a scalar, (K,), or concentrations broadcastable to x (e.g. (B, L, K)
        per sample and position) -> (B, ...), computed in float64 and returned in x's dtype. Use
        `+ (-0.5 * log(x).sum(-1))` to get the usual Lebesgue density back."""
        if isinstance(x, torch.Tensor) and x.dim() > 2:
            self.check_point(x.reshape(-1, x.shape[-1]), "x")
        else:
            self.check_point(x, "x")
        if isinstance(alpha, torch.Tensor) and alpha.dim() >= 2:
            a = self._concentrations(alpha, "alpha").to(device=x.device, dtype=torch.float64)
            try:
                torch.broadcast_shapes(a.shape, x.shape)
            except RuntimeError:
                raise ValueError(f"alpha: shape {tuple(a.shape)} does not broadcast to x's {tuple(x.shape)}") from None
        else:
            a = self._alpha(alpha, x.device, torch.float64)
        log_norm = torch.lgamma(a.sum(-1)) - torch.lgamma(a).sum(-1)
        log_x = x.to(torch.float64).clamp_min(torch.finfo(torch.float64).tiny).log()
        return (log_norm + ((a - 0.5) * log_x).sum(-1)).to(x.dtype)

    def _concentrations(self, alpha: torch.Tensor, name: str) -> torch.Tensor:
        if alpha.shape[-1] != self.ambient_dim:
            raise ValueError(f"{name}: expected concentrations (..., {self.ambient_dim}), got {tuple(alpha.shape)}")
        if not bool(torch.isfinite(alpha).all()) or not bool((alpha > 0).all()):
            raise ValueError(f"{name}: expected finite positive concentrations")
        return alpha

    def _alpha(self, alpha, device, dtype) -> torch.Tensor:
        a = torch.as_tensor(alpha, device=device, dtype=dtype if dtype is not None else torch.get_default_dtype())
        if a.dim() > 1 or (a.dim() == 1 and a.shape[0] != self.ambient_dim):
            raise ValueError(f"alpha: expected a scalar or shape ({self.ambient_dim},), got {tuple(a.shape)}")
        if not bool(torch.isfinite(a).all()) or not bool((a > 0).all()):
            raise ValueError("alpha: expected finite positive concentrations")
        return a.expand(self.ambient_dim)


def _gamma(alpha: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Gamma(alpha, 1) draws of alpha's shape, by Marsaglia-Tsang rejection (alpha < 1 boosted by U^(1/alpha))."""
    boosted = alpha + (alpha < 1).to(alpha.dtype)
    d = boosted - 1 / 3
    c = 1 / (9 * d).sqrt()
    out = torch.empty_like(alpha)
    pending = torch.ones_like(alpha, dtype=torch.bool)
    while bool(pending.any()):
        x = randn(alpha.shape, generator=generator, device=alpha.device, dtype=alpha.dtype)
        u = rand(alpha.shape, generator=generator, device=alpha.device, dtype=alpha.dtype)
        v = (1 + c * x) ** 3
        ok = (v > 0) & (u.log() < 0.5 * x * x + d - d * v + d * v.clamp_min(1e-30).log())
        take = pending & ok
        out = torch.where(take, d * v, out)
        pending = pending & ~take
    u = rand(alpha.shape, generator=generator, device=alpha.device, dtype=alpha.dtype)
    boost = torch.where(alpha < 1, u.pow(1 / alpha), torch.ones_like(alpha))
    return out * boost
