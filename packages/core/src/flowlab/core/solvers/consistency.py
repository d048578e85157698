"""Multistep consistency sampling (Song et al. 2023, Algorithm 1) in EDM noise levels."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.distributions import Generators, randn
from flowlab.core.solvers.trajectory import Trajectory
from flowlab.core.validation import check_tensor

__all__ = ["consistency_sample"]


def consistency_sample(
    consistency_fn: Callable[..., torch.Tensor],
    noise: torch.Tensor,
    sigmas: torch.Tensor,
    *,
    sigma_min: float = 0.002,
    generator: Generators = None,
    return_trajectory: bool = False,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """x = f(sigmas[0] noise; sigmas[0]), then for each later level s: x = f(x + sqrt(s^2 - sigma_min^2) z; s).

    consistency_fn: `f(x=, sigma=(B,), **cond)` -> the clean endpoint (an `ECMPreconditioner` in eval mode);
    noise: (B, ...) standard normal; sigmas: (K,) strictly decreasing levels > sigma_min, sigmas[0] the prior's
    (K = 1 is one-step sampling, K = 2 two-step with sigmas[1] the intermediate level); fresh noise z is drawn
    with `generator` (one per sample for per-sample reproducibility). Returns x: (B, ...), or the `Trajectory` of
    the K endpoints with `times` = sigmas. Runs under `torch.inference_mode()` unless called with grad enabled.
    """
    if not callable(consistency_fn):
        raise ValueError(f"consistency_fn: expected a callable f(x=, sigma=), got {type(consistency_fn).__name__}")
    check_tensor(noise, "noise")
    if not isinstance(sigmas, torch.Tensor) or sigmas.dim() != 1 or sigmas.numel() < 1:
        shape = tuple(sigmas.shape) if isinstance(sigmas, torch.Tensor) else type(sigmas).__name__
        raise ValueError(f"sigmas: expected a 1-D tensor of at least one noise level, got {shape}")
    if not (isinstance(sigma_min, int | float) and math.isfinite(sigma_min) and sigma_min >= 0):
        raise ValueError(f"sigma_min: expected a finite number >= 0, got {sigma_min!r}")
    levels = sigmas.tolist()
    if not all(math.isfinite(s) and s > sigma_min for s in levels):
        raise ValueError(f"sigmas: expected finite levels above sigma_min = {sigma_min:g}")
    if any(b >= a for a, b in itertools.pairwise(levels)):
        raise ValueError("sigmas: expected strictly decreasing noise levels (the prior's first)")
    batch, device, dtype = noise.shape[0], noise.device, noise.dtype

    def level(s: float) -> torch.Tensor:
        return torch.full((batch,), s, device=device, dtype=dtype)

    x = consistency_fn(x=levels[0] * noise, sigma=level(levels[0]), **cond)
    states = [x]
    for s in levels[1:]:
        z = randn(noise.shape, generator=generator, device=device, dtype=dtype)
        x = consistency_fn(x=x + math.sqrt(s * s - sigma_min * sigma_min) * z, sigma=level(s), **cond)
        states.append(x)
    if return_trajectory:
        return Trajectory(times=sigmas, states=torch.stack(states))
    return x
