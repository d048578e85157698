"""Bridge paths: the Brownian / Schrodinger bridge between pinned endpoints, and its noised-source form.

BridgePath(sigma): x_t = t x_1 + (1 - t) x_0 + sigma sqrt(t (1 - t)) z, z ~ N(0, I), whose conditional
velocity (for fixed z) is u_t = x_1 - x_0 + sigma (1 - 2t) / (2 sqrt(t (1 - t))) z and conditional score
-z / (sigma sqrt(t (1 - t))). With a cumulative-variance function S(t) = int_0^t g(u)^2 du instead of sigma,
it is the bridge of the zero-drift SDE dX = g(t) dW: mean (1 - r) x_0 + r x_1, variance r (1 - r) V with r =
S(t) / V, V = S(1) (a constant sigma is S(t) = sigma^2 t). Times are clipped to [eps, 1 - eps] (eps = 1e-4)
where 1/sqrt(t(1-t)) is finite.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.func import jvp

from flowlab.core.distributions import Generators, randn
from flowlab.core.paths.base import PathSample
from flowlab.core.validation import check_same_batch, check_tensor, check_time, expand_like

__all__ = ["AugmentedBridgePath", "BridgePath", "BridgePathSample"]

_EPS = 1e-4


@dataclass(frozen=True)
class BridgePathSample(PathSample):
    """A bridge draw: the PathSample fields plus the Gaussian noise and the conditional score at x_t.

    x_0, x_1, x_t, dx_t, noise, score: (B, ...); t: (B,) (the clipped times actually used).
    """

    noise: torch.Tensor
    score: torch.Tensor


def _check_endpoints(x_0: torch.Tensor, x_1: torch.Tensor, t: torch.Tensor, noise: torch.Tensor | None) -> None:
    check_tensor(x_0, "x_0")
    check_tensor(x_1, "x_1")
    batch = check_same_batch(x_0=x_0, x_1=x_1)
    if x_0.shape != x_1.shape:
        raise ValueError(f"x_0, x_1: shapes differ, {tuple(x_0.shape)} vs {tuple(x_1.shape)}")
    check_time(t, batch)
    if noise is not None:
        check_tensor(noise, "noise")
        if noise.shape != x_1.shape:
            raise ValueError(f"noise: expected shape {tuple(x_1.shape)} (like x_1), got {tuple(noise.shape)}")


class BridgePath:
    """Brownian (Schrodinger) bridge from x_0 (t=0) to x_1 (t=1).

    sigma: a positive diffusion coefficient, or a callable `var_fn(t) -> S(t)` giving the cumulative variance
    int_0^t g^2 elementwise (non-decreasing, S(0) = 0, S(1) > 0; differentiated with forward-mode autodiff).
    """

    def __init__(self, sigma: float | Callable[[torch.Tensor], torch.Tensor], *, eps: float = _EPS) -> None:
        if callable(sigma):
            self.var_fn: Callable[[torch.Tensor], torch.Tensor] | None = sigma
            self.sigma = None
        else:
            if not (isinstance(sigma, int | float) and math.isfinite(sigma) and sigma > 0):
                raise ValueError(
                    f"sigma: expected a positive number or a cumulative-variance callable, got {sigma!r} "
                    "(use AffinePath(CondOT()) for sigma = 0)"
                )
            self.var_fn, self.sigma = None, float(sigma)
        if not 0 < eps < 0.5:
            raise ValueError(f"eps: expected a clipping margin in (0, 0.5), got {eps!r}")
        self.eps = float(eps)

    def __repr__(self) -> str:
        return f"BridgePath({self.sigma if self.var_fn is None else self.var_fn!r})"

    def _schedule(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """t: (B,) -> (r, dr/dt, std, dstd/dt), each (B,): weight of x_1 in the mean, noise std, and their rates."""
        if self.var_fn is None:
            root = torch.sqrt(t * (1 - t))
            return t, torch.ones_like(t), self.sigma * root, self.sigma * (1 - 2 * t) / (2 * root)
        S, dS = jvp(self.var_fn, (t,), (torch.ones_like(t),))
        V = self.var_fn(torch.ones_like(t[:1]))
        if not bool((V > 0).all()):
            raise ValueError("sigma: the cumulative variance S(1) must be positive")
        r, dr = S / V, dS / V
        std = torch.sqrt((r * (1 - r) * V).clamp_min(0))
        return r, dr, std, dr * (1 - 2 * r) * V / (2 * std)

    def sample(
        self,
        x_0: torch.Tensor,
        x_1: torch.Tensor,
        t: torch.Tensor,
        *,
        generator: Generators = None,
        noise: torch.Tensor | None = None,
    ) -> BridgePathSample:
        """x_0, x_1: (B, ...), t: (B,) in [0, 1] -> BridgePathSample; `noise` (B, ...) replaces z ~ N(0, I)."""
        _check_endpoints(x_0, x_1, t, noise)
        t = t.to(x_1.dtype).clamp(self.eps, 1 - self.eps)
        z = noise if noise is not None else randn(x_1.shape, generator=generator, device=x_1.device, dtype=x_1.dtype)
        r, dr, std, dstd = (expand_like(v, x_1) for v in self._schedule(t))
        x_t = (1 - r) * x_0 + r * x_1 + std * z
        dx_t = dr * (x_1 - x_0) + dstd * z
        return BridgePathSample(x_0=x_0, x_1=x_1, t=t, x_t=x_t, dx_t=dx_t, noise=z, score=-z / std)


class AugmentedBridgePath:
    """Bridge with a noised source endpoint, for conditional bridge models (SFBD-OMNI, augmented bridges).

    x_t = (1 - t) y' + t x_1 + sigma sqrt(t (1 - t)) z with y' = x_0 + source_noise * e, e, z ~ N(0, I);
    the regression target dx_t is the bridge's SDE drift (x_1 - x_t) / (1 - t). The sample's x_0 is y'.
    """

    def __init__(self, sigma: float, *, source_noise: float = 1e-2, eps: float = _EPS) -> None:
        if not (isinstance(source_noise, int | float) and math.isfinite(source_noise) and source_noise >= 0):
            raise ValueError(f"source_noise: expected a non-negative standard deviation, got {source_noise!r}")
        self.bridge = BridgePath(sigma, eps=eps)
        self.sigma = self.bridge.sigma
        self.source_noise = float(source_noise)

    def __repr__(self) -> str:
        return f"AugmentedBridgePath({self.sigma}, source_noise={self.source_noise})"

    def source(self, y: torch.Tensor, *, generator: Generators = None) -> torch.Tensor:
        """The bridge's start y' = y + source_noise * e, e ~ N(0, I) from `generator`; y: (B, ...)."""
        check_tensor(y, "y")
        if self.source_noise == 0:
            return y
        return y + self.source_noise * randn(y.shape, generator=generator, device=y.device, dtype=y.dtype)

    def sample(
        self,
        x_0: torch.Tensor,
        x_1: torch.Tensor,
        t: torch.Tensor,
        *,
        generator: Generators = None,
        noise: torch.Tensor | None = None,
    ) -> BridgePathSample:
        """x_0 (the observation y), x_1 (clean data): (B, ...), t: (B,) -> BridgePathSample with x_0 = y'.

        Draws z then e from `generator`; `noise` overrides z.
        """
        _check_endpoints(x_0, x_1, t, noise)
        z = noise if noise is not None else randn(x_1.shape, generator=generator, device=x_1.device, dtype=x_1.dtype)
        y = self.source(x_0, generator=generator)
        s = self.bridge.sample(y, x_1, t, noise=z)
        drift = (x_1 - s.x_t) / (1 - expand_like(s.t, x_1))
        return BridgePathSample(x_0=y, x_1=x_1, t=s.t, x_t=s.x_t, dx_t=drift, noise=z, score=s.score)
