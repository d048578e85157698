"""Wrapped normal distributions: a Gaussian in the tangent space at the origin, transported to a mean and pushed
through the exponential map (Nagano et al. 2019; Mathieu et al. 2019)."""

from __future__ import annotations

import torch

from flowlab.core.distributions import Generators, randn
from flowlab.core.manifolds.base import Manifold, check_count

__all__ = ["WrappedNormal"]


class WrappedNormal:
    """z = exp_mean(P_{origin -> mean}(E w)), w ~ N(0, diag(scale^2)) in orthonormal coordinates of T_origin
    (E = `manifold.origin_frame`, P = parallel transport), so the Riemannian distance d(mean, z) = ||w||.

    mean: (ambient_dim,) on the manifold; scale: a positive float or tensor of shape () or (dim,).
    `log_prob` is w.r.t. the Riemannian volume and closed form:
    log N(v) - (d-1) log(sinh(sqrt(c) r) / (sqrt(c) r)) on hyperbolic space (r = ||v||), log N(v) on Euclidean space,
    and on the sphere and torus the exact sum over all preimages of exp (see their `wrapped_log_prob`).
    Works on any manifold implementing the origin hooks (Euclidean, Sphere, FlatTorus, PoincareBall, Lorentz, Product).
    On the sphere the mean must not be the antipode of the origin (transport is undefined there).
    """

    def __init__(self, manifold: Manifold, mean: torch.Tensor, scale: float | torch.Tensor) -> None:
        if not isinstance(manifold, Manifold):
            raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold, got {type(manifold).__name__}")
        if not isinstance(mean, torch.Tensor) or mean.shape != (manifold.ambient_dim,):
            shape = tuple(mean.shape) if isinstance(mean, torch.Tensor) else type(mean).__name__
            raise ValueError(f"mean: expected shape ({manifold.ambient_dim},), got {shape}")
        manifold.check_point(mean.unsqueeze(0), "mean")
        scale = torch.as_tensor(scale, dtype=mean.dtype, device=mean.device)
        if scale.dim() > 1 or (scale.dim() == 1 and scale.shape[0] != manifold.dim):
            raise ValueError(f"scale: expected a scalar or shape ({manifold.dim},), got {tuple(scale.shape)}")
        if not bool(torch.isfinite(scale).all()) or not bool((scale > 0).all()):
            raise ValueError("scale: expected finite positive standard deviations")
        self.manifold = manifold
        self.mean = mean
        self.scale = scale.expand(manifold.dim)
        self._origin = manifold.origin(device=mean.device, dtype=mean.dtype)
        frame = manifold.origin_frame(torch.eye(manifold.dim, device=mean.device, dtype=mean.dtype))
        moved = manifold.transp(self._origin.expand_as(frame), mean.expand_as(frame), frame)
        norms = manifold.norm(mean.expand_as(frame), moved)
        if not bool(torch.isfinite(moved).all()) or not bool(((norms - 1).abs() < 1e-3).all()):
            raise ValueError(f"mean: parallel transport from the origin of {manifold!r} is undefined at this mean")

    def __repr__(self) -> str:
        return f"WrappedNormal({self.manifold!r}, mean={self.mean.tolist()}, scale={self.scale.tolist()})"

    def sample(self, n: int, *, generator: Generators = None) -> torch.Tensor:
        """n draws on the mean's device and dtype: (n, ambient_dim)."""
        m = self.manifold
        w = self.scale * randn(
            (check_count(n), m.dim), generator=generator, device=self.mean.device, dtype=self.mean.dtype
        )
        origin, mean = self._origin.expand(n, -1), self.mean.expand(n, -1)
        return m.expmap(mean, m.transp(origin, mean, m.origin_frame(w)))

    def log_prob(self, z: torch.Tensor) -> torch.Tensor:
        """Log-density w.r.t. the Riemannian volume: z: (B, ambient_dim) on the manifold -> (B,)"""
        m = self.manifold
        m.check_point(z, "z")
        origin, mean = self._origin.expand_as(z), self.mean.expand_as(z)
        v = m.origin_coords(m.transp(mean, origin, m.logmap(mean, z)))
        return m.wrapped_log_prob(v, self.scale)
