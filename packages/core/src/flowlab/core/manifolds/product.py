"""Cartesian products of manifolds, with points concatenated along the last axis."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from flowlab.core.distributions import Generators
from flowlab.core.manifolds.base import Manifold

__all__ = ["Product"]


class Product(Manifold):
    """M_1 x ... x M_k: points (B, sum ambient_dim_i), split in order; the metric, log-densities and log-volumes
    add up, exp/log/projections act factor by factor. Base distribution: the product of the factors' bases.
    `belongs(x, atol)` passes `atol` (when given) to every factor, else each factor uses its own tolerance.
    """

    def __init__(self, factors: Sequence[Manifold]) -> None:
        factors = list(factors) if isinstance(factors, Sequence) else []
        if not factors or not all(isinstance(m, Manifold) for m in factors):
            raise ValueError("factors: expected a non-empty sequence of Manifold instances")
        self.factors = factors
        self.dim = sum(m.dim for m in factors)
        self.ambient_dim = sum(m.ambient_dim for m in factors)
        self._ambient = [m.ambient_dim for m in factors]
        self._intrinsic = [m.dim for m in factors]

    def __repr__(self) -> str:
        return f"Product([{', '.join(map(repr, self.factors))}])"

    def _split(self, *tensors: torch.Tensor, sizes: list[int] | None = None):
        parts = [t.split(self._ambient if sizes is None else sizes, dim=-1) for t in tensors]
        return zip(self.factors, *parts, strict=True)

    def expmap(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Factor-wise exp, concatenated: (B, ambient_dim), (B, ambient_dim) -> (B, ambient_dim)."""
        return torch.cat([m.expmap(a, b) for m, a, b in self._split(x, u)], dim=-1)

    def logmap(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Factor-wise log, concatenated: (B, ambient_dim), (B, ambient_dim) -> (B, ambient_dim)."""
        return torch.cat([m.logmap(a, b) for m, a, b in self._split(x, y)], dim=-1)

    def projx(self, x: torch.Tensor) -> torch.Tensor:
        """Factor-wise `projx`, concatenated: (B, ambient_dim) -> (B, ambient_dim)."""
        return torch.cat([m.projx(a) for m, a in self._split(x)], dim=-1)

    def proju(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Factor-wise `proju`, concatenated: (B, ambient_dim) -> (B, ambient_dim)."""
        return torch.cat([m.proju(a, b) for m, a, b in self._split(x, u)], dim=-1)

    def inner(self, x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Sum of the factors' inner products: -> (B,)."""
        return sum(m.inner(a, b, c) for m, a, b, c in self._split(x, u, v))

    def dist(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Square root of the sum of the factors' squared distances: -> (B,)."""
        return sum(m.dist(a, b) ** 2 for m, a, b in self._split(x, y)).sqrt()

    def transp(self, x: torch.Tensor, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Factor-wise transport, concatenated: (B, ambient_dim) -> (B, ambient_dim)."""
        return torch.cat([m.transp(a, b, c) for m, a, b, c in self._split(x, y, u)], dim=-1)

    def at_boundary(self, x: torch.Tensor) -> torch.Tensor:
        """Bool mask (B,): any factor is at its boundary."""
        return torch.stack([m.at_boundary(a) for m, a in self._split(x)]).any(dim=0)

    def belongs(self, x: torch.Tensor, atol: float | None = None) -> torch.Tensor:
        """Bool mask (B,): every factor's slice lies on that factor."""
        ok = [m.belongs(a, atol) for m, a in self._split(x)]
        return torch.stack(ok).all(dim=0)

    def random_uniform(self, n: int, *, generator: Generators = None, device=None, dtype=None) -> torch.Tensor:
        """Independent uniform draws per factor (every factor must be compact): (n, ambient_dim)."""
        return torch.cat(
            [m.random_uniform(n, generator=generator, device=device, dtype=dtype) for m in self.factors], dim=-1
        )

    def log_volume(self) -> float:
        """Sum of the factors' log-volumes (every factor must be compact)."""
        return sum(m.log_volume() for m in self.factors)

    def random_base(self, n: int, *, generator: Generators = None, device=None, dtype=None) -> torch.Tensor:
        """Independent base draws per factor, concatenated: (n, ambient_dim)."""
        return torch.cat(
            [m.random_base(n, generator=generator, device=device, dtype=dtype) for m in self.factors], dim=-1
        )

    def base_log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Sum of the factors' base log-densities: (B, ambient_dim) -> (B,)."""
        self.check_point(x, "x")
        return sum(m.base_log_prob(a) for m, a in self._split(x))

    def origin(self, *, device=None, dtype=None) -> torch.Tensor:
        """The factors' origins, concatenated: (ambient_dim,)."""
        return torch.cat([m.origin(device=device, dtype=dtype) for m in self.factors])

    def origin_frame(self, v: torch.Tensor) -> torch.Tensor:
        """Factor-wise `origin_frame` on v split by intrinsic dims: (B, dim) -> (B, ambient_dim)."""
        return torch.cat([m.origin_frame(a) for m, a in self._split(v, sizes=self._intrinsic)], dim=-1)

    def origin_coords(self, u: torch.Tensor) -> torch.Tensor:
        """Factor-wise `origin_coords`: (B, ambient_dim) -> (B, dim)."""
        return torch.cat([m.origin_coords(a) for m, a in self._split(u)], dim=-1)

    def wrapped_log_prob(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """Sum of the factors' wrapped log-densities (the tangent Gaussian is diagonal, so it factorises)."""
        vs = v.split(self._intrinsic, dim=-1)
        scales = scale.split(self._intrinsic, dim=-1)
        return sum(m.wrapped_log_prob(a, s) for m, a, s in zip(self.factors, vs, scales, strict=True))
