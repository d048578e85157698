"""The flat torus T^d = (S^1)^d in angle coordinates."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from flowlab.core.distributions import rand
from flowlab.core.manifolds.base import Manifold, check_count
from flowlab.core.manifolds.sphere import windings_for

__all__ = ["FlatTorus", "wrap"]


def wrap(a: torch.Tensor) -> torch.Tensor:
    """Angles modulo 2 pi into [-pi, pi)."""
    return torch.remainder(a + math.pi, 2 * math.pi) - math.pi


class FlatTorus(Manifold):
    """T^d with angles x in [-pi, pi)^d and the flat metric: exp_x(u) = wrap(x + u), log_x(y) = wrap(y - x).

    Points and tangent vectors: (B, d). Base distribution: uniform, volume (2 pi)^d. `belongs` accepts angles in
    [-pi - atol, pi + atol].
    """

    atol = 1e-6

    def __init__(self, d: int) -> None:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d: expected a positive int dimension, got {d!r}")
        self.dim = self.ambient_dim = d

    def input_features(self, x: torch.Tensor) -> torch.Tensor:
        """Seam-free network input: angles (B, d) -> (cos, sin) features (B, 2d)."""
        return torch.cat([torch.cos(x), torch.sin(x)], dim=-1)

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """wrap(x + u): (B, d), (B, d) -> (B, d)."""
        return wrap(x + u)

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """wrap(y - x), the shortest signed angle differences: (B, d), (B, d) -> (B, d)."""
        return wrap(y - x)

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Wraps angles into `[-pi, pi)`: (B, d) -> (B, d)."""
        return wrap(x)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Identity: every vector is tangent (flat angle coordinates)."""
        return u

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Flat dot product: (B, d), (B, d) -> (B,)."""
        return (u * v).sum(-1)

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Identity: the metric is flat, so parallel transport leaves u unchanged."""
        return u

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): every angle lies in `[-pi - atol, pi + atol]`."""
        tol = self.atol if atol is None else atol
        return ((x >= -math.pi - tol) & (x <= math.pi + tol)).all(dim=-1)

    def random_uniform(
        self,
        n: int,
        *,
        generator: torch.Generator | Sequence[torch.Generator] | None = None,
        device=None,
        dtype=None,
    ) -> torch.Tensor:
        """Uniform angles in [-pi, pi)^d: (n, d). A list of generators gives one per sample."""
        check_count(n)
        u = rand((n, self.dim), generator=generator, device=device, dtype=dtype)
        return wrap(2 * math.pi * u - math.pi)

    def log_volume(self) -> float:
        """d log(2 pi)"""
        return self.dim * math.log(2 * math.pi)

    def random_base(self, n: int, *, generator=None, device=None, dtype=None) -> torch.Tensor:
        """The uniform distribution (see `random_uniform`): (n, d)."""
        return self.random_uniform(n, generator=generator, device=device, dtype=dtype)

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Uniform log-density -d log(2 pi): (B, d) -> (B,)"""
        self.check_point(x, "x")
        return torch.full(x.shape[:1], -self.log_volume(), dtype=x.dtype, device=x.device)

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """Zero angles: (d,)."""
        return torch.zeros(self.dim, device=device, dtype=dtype)

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Identity (angle coordinates are orthonormal): (B, d) -> (B, d)."""
        return v

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Identity, the inverse of `origin_frame`: (B, d) -> (B, d)."""
        return u

    def exp_log_det(self, r: torch.Tensor) -> torch.Tensor:
        """Zeros shaped like r: the flat exp has unit Jacobian determinant (`wrapped_log_prob` sums the windings)."""
        return torch.zeros_like(r)

    def wrapped_log_prob(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Exact wrapped normal: per angle, log sum_j N(v_i + 2 pi j; 0, scale_i^2) over |j| <= windings."""
        k = windings_for(scale)
        shifts = 2 * math.pi * torch.arange(-k, k + 1, device=v.device, dtype=v.dtype)
        z = (v.unsqueeze(-1) + shifts) / scale.unsqueeze(-1)  # (B, d, 2k+1)
        per_angle = torch.logsumexp(-0.5 * z.pow(2), dim=-1) - scale.log() - 0.5 * math.log(2 * math.pi)
        return per_angle.sum(-1)
