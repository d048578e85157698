"""The unit sphere S^d embedded in R^(d+1)."""

from __future__ import annotations

import math

import torch

from flowlab.core.distributions import randn
from flowlab.core.manifolds.base import Manifold, check_count, diag_normal_log_prob, log_sphere_volume, sin_over

__all__ = ["Sphere", "windings_for"]


def windings_for(scale: torch.Tensor) -> int:
    """How many 2 pi windings a wrapped Gaussian of standard deviation `scale` needs: winding j has its preimages at
    tangent radius >= 2 pi j - pi, so it is kept while that is under 10 sigma (0 for sigma < pi / 10)."""
    return math.floor((10.0 * float(scale.max()) + math.pi) / (2 * math.pi))


class Sphere(Manifold):
    """S^d = {x in R^(d+1): ||x|| = 1} with the induced metric. Points and tangent vectors: (B, d+1).

    exp_x(u) = cos(||u||) x + sin(||u||) u / ||u|| (series for small ||u||). log_x(y) uses the angle
    atan2(||y - <x,y> x||, <x,y>), accurate for nearby and for nearly antipodal points. At an exactly antipodal pair
    every direction is a minimising geodesic; `logmap` then returns the one of length pi toward the coordinate axis
    least aligned with x (deterministic, so exp_x(log_x(-x)) = -x). Parallel transport is undefined there.
    Base distribution: uniform (log-density -log_volume()). `atol` bounds | ||x|| - 1 |.
    """

    atol = 1e-4

    def __init__(self, d: int) -> None:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d: expected a positive int dimension, got {d!r}")
        self.dim = d
        self.ambient_dim = d + 1

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """cos(||u||) x + sin(||u||) u / ||u||, then `projx`: (B, d+1), (B, d+1) -> (B, d+1).

        Finite first and second derivatives at u = 0."""
        # the norm through a double `where`: finite first and second derivatives at u = 0 (flow maps take
        # forward-mode JVPs through exp at zero-length steps and backpropagate through them)
        sq = (u * u).sum(-1, keepdim=True)
        positive = sq > 0
        n = torch.where(positive, torch.sqrt(torch.where(positive, sq, torch.ones_like(sq))), torch.zeros_like(sq))
        return self.projx(torch.cos(n) * x + sin_over(n) * u)

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Via the angle atan2(||y - <x, y> x||, <x, y>): (B, d+1), (B, d+1) -> (B, d+1).

        At an exact antipode: the vector of length pi toward the coordinate axis least aligned with x."""
        c = (x * y).sum(-1, keepdim=True)
        u = y - c * x
        s = u.norm(dim=-1, keepdim=True)
        theta = torch.atan2(s, c)
        positive = s > 0
        ratio = torch.where(positive, theta / torch.where(positive, s, torch.ones_like(s)), torch.ones_like(s))
        log = ratio * u
        antipodal = (s <= torch.finfo(x.dtype).eps) & (c < 0)
        # exactly antipodal: a deterministic direction, the axis least aligned with x, projected to T_x
        axis = torch.nn.functional.one_hot(x.abs().argmin(dim=-1), self.ambient_dim).to(x.dtype)
        e = self.proju(x, axis)
        fallback = math.pi * e / e.norm(dim=-1, keepdim=True)
        return torch.where(antipodal, fallback, log)

    def dist(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """x, y: (B, d + 1) -> (B,): atan2(|y − <x, y> x|, <x, y>), the length of `logmap` without building it,
        accurate at 0 and at the antipode alike, and about 2× cheaper (the pairwise MMD kernels call it most). At the
        exact antipode the distance is not differentiable and its gradient there is arbitrary."""
        c = (x * y).sum(-1, keepdim=True)
        return torch.atan2((y - c * x).norm(dim=-1), c.squeeze(-1))

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Normalises to unit length: (B, d+1) -> (B, d+1)."""
        return x / x.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """u - <x, u> x: (B, d+1), (B, d+1) -> (B, d+1)."""
        return u - (x * u).sum(-1, keepdim=True) * x

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Ambient dot product: (B, d+1), (B, d+1) -> (B,)."""
        return (u * v).sum(-1)

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Parallel transport along the minimising geodesic (undefined for antipodal x, y)."""
        k = (y * u).sum(-1, keepdim=True) / (1 + (x * y).sum(-1, keepdim=True))
        return u - k * (x + y)

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): | ||x|| - 1 | <= atol."""
        tol = self.atol if atol is None else atol
        return (x.norm(dim=-1) - 1).abs() <= tol

    def random_uniform(
        self, n: int, *, generator: torch.Generator | None = None, device=None, dtype=None
    ) -> torch.Tensor:
        """Uniform draws (normalised Gaussians): (n, d+1)."""
        z = randn((check_count(n), self.ambient_dim), generator=generator, device=device, dtype=dtype)
        return self.projx(z)

    def log_volume(self) -> float:
        """log |S^d| = log(2 pi^((d+1)/2) / Gamma((d+1)/2)); log 4 pi for S^2."""
        return log_sphere_volume(self.dim)

    def random_base(self, n: int, *, generator: torch.Generator | None = None, device=None, dtype=None) -> torch.Tensor:
        """Uniform draws (see `random_uniform`): (n, d+1)."""
        return self.random_uniform(n, generator=generator, device=device, dtype=dtype)

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Uniform log-density -log|S^d|: (B, d+1) -> (B,)"""
        self.check_point(x, "x")
        return torch.full(x.shape[:1], -self.log_volume(), dtype=x.dtype, device=x.device)

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """The "north pole" e_0 = (1, 0, ..., 0)."""
        o = torch.zeros(self.ambient_dim, device=device, dtype=dtype)
        o[0] = 1
        return o

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Coordinates v: (B, d) -> tangent vectors (0, v) at the north pole: (B, d+1)."""
        return torch.nn.functional.pad(v, (1, 0))

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Drops the first coordinate, the inverse of `origin_frame`: (B, d+1) -> (B, d)."""
        return u[..., 1:]

    def exp_log_det(self, r: torch.Tensor) -> torch.Tensor:
        """(d - 1) log |sin r / r|"""
        return (self.dim - 1) * sin_over(r).abs().log()

    def wrapped_log_prob(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Exact wrapped-normal density: sums over every preimage a w (a = r + 2 pi j, w = v / r, |j| <= windings)
        of N(a w) / |sin a / a|^(d-1). The j=0 term is the single-chart closed form log N(v) - (d-1) log(sin r / r),
        the whole answer when scale < pi / 10. For d >= 2 the other terms make the density (integrably) singular at
        the mean (and every term at the antipode): there the result is large but finite (sin r is floored at `tiny`)."""
        k = windings_for(scale)
        r = v.norm(dim=-1)
        w = v / torch.where(r > 0, r, torch.ones_like(r)).unsqueeze(-1)
        terms = [diag_normal_log_prob(v, scale) - self.exp_log_det(r)]
        log_sin = torch.sin(r).abs().clamp_min(torch.finfo(v.dtype).tiny).log()
        for j in range(1, k + 1):
            for a in (r + 2 * math.pi * j, r - 2 * math.pi * j):
                log_jac = (self.dim - 1) * (log_sin - a.abs().log())
                terms.append(diag_normal_log_prob(a.unsqueeze(-1) * w, scale) - log_jac)
        return torch.logsumexp(torch.stack(terms), dim=0)
