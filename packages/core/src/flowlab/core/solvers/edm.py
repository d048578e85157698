"""The EDM sampler (Karras et al. 2022, Algorithm 2): Heun steps in sigma with optional stochastic churn."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.distributions import Generators, randn
from flowlab.core.solvers.trajectory import StepInfo, Trajectory, check_callback, run_grid
from flowlab.core.validation import check_tensor, expand_like

__all__ = ["edm_sample"]


def _check_sigmas(sigmas: Any, batch: int) -> None:
    ok = isinstance(sigmas, torch.Tensor) and sigmas.dim() in (1, 2) and sigmas.shape[0] >= 2
    if not ok or (sigmas.dim() == 2 and sigmas.shape[1] != batch):
        shape = tuple(sigmas.shape) if isinstance(sigmas, torch.Tensor) else type(sigmas).__name__
        raise ValueError(
            f"sigmas: expected at least 2 noise levels, (N + 1,) or per sample (N + 1, {batch}), got {shape}"
        )
    if not bool(torch.isfinite(sigmas).all()) or bool((sigmas < 0).any()):
        raise ValueError("sigmas: expected finite, non-negative noise levels")
    if not bool((sigmas[1:] < sigmas[:-1]).all()):
        raise ValueError("sigmas: expected strictly decreasing noise levels (sigma_max first)")
    if sigmas.dim() == 2:
        zero = sigmas == 0
        if bool((zero.any(1) & ~zero.all(1)).any()):
            raise ValueError("sigmas: a level of per-sample noise levels is 0 for every sample or for none")


def edm_sample(
    denoiser: Callable[..., torch.Tensor],
    noise: torch.Tensor | None,
    sigmas: torch.Tensor,
    *,
    x_init: torch.Tensor | None = None,
    churn: float = 0.0,
    s_tmin: float = 0.0,
    s_tmax: float = math.inf,
    s_noise: float = 1.0,
    generator: Generators = None,
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """Sample with the EDM stochastic sampler: x = sigmas[0] * noise (or x = x_init), then per step i

    gamma = min(churn / N, sqrt(2) - 1) if s_tmin <= sigma_i <= s_tmax else 0; sigma_hat = (1 + gamma) sigma_i;
    x_hat = x + sqrt(sigma_hat^2 - sigma_i^2) s_noise z; d = (x_hat - D(x_hat, sigma_hat)) / sigma_hat;
    x' = x_hat + (sigma_{i+1} - sigma_hat) d, corrected by the trapezoid rule unless sigma_{i+1} = 0.

    denoiser: called as `denoiser(x=x, sigma=sigma, **cond)` with `sigma: (B,)`, returning E[x_data | x];
    noise: (B, ...) standard normal draws; sigmas: (N + 1,) strictly decreasing noise levels, usually ending in 0
    (e.g. `torch.cat([schedules.EDM()(grids.uniform(N - 1)).sigma, torch.zeros(1)])`), or per sample (N + 1, B)
    (each sample its own start, e.g. the ODE from states at different levels; deterministic only, churn = 0, and
    a level is 0 for all samples or none); x_init: (B, ...) a given
    state at noise level sigmas[0] to start from instead of noise (pass noise=None), e.g. an observation
    y = x + sigma_0 e of Gaussian-noised data, whose denoising is then a posterior sample (SFBD); churn = 0 gives the
    deterministic Heun sampler (no generator needed). With `return_trajectory=True` the trajectory's `times` are
    the sigmas; callbacks receive sigma_i and sigma_{i+1} as `t` and `t_next`.
    """
    if not callable(denoiser):
        raise ValueError(f"denoiser: expected a callable denoiser(x=..., sigma=...), got {type(denoiser).__name__}")
    if (noise is None) == (x_init is None):
        raise ValueError("noise, x_init: give exactly one (noise to start at sigmas[0] * noise, x_init to start there)")
    start = x_init if noise is None else noise
    check_tensor(start, "noise" if x_init is None else "x_init")
    _check_sigmas(sigmas, start.shape[0])
    if sigmas.dim() == 2 and churn > 0:
        raise ValueError("churn: per-sample sigmas (N + 1, B) take the deterministic sampler only (churn = 0)")
    for name, value in (("churn", churn), ("s_noise", s_noise)):
        if not value >= 0:
            raise ValueError(f"{name}: expected a non-negative number, got {value}")
    check_callback(callback)

    batch, device, dtype = start.shape[0], start.device, start.dtype
    if sigmas.dim() == 2:  # deterministic: no per-level decisions but whether the next level is 0
        n, gammas = sigmas.shape[0] - 1, [0.0] * (sigmas.shape[0] - 1)
        positive = (sigmas[:, 0] > 0).tolist()
        sig = sig_hat = sigmas.to(device=device, dtype=dtype)
        first: Any = sig[0]
    else:
        levels = sigmas.tolist()  # the per-step decisions below are made once, on the host, before the loop
        n, positive = len(levels) - 1, [s > 0 for s in levels]
        gammas = [min(churn / n, math.sqrt(2) - 1) if s_tmin <= s <= s_tmax else 0.0 for s in levels[:-1]]
        hats = [(1 + g) * s for g, s in zip(gammas, levels)]
        sig = torch.tensor(levels, device=device, dtype=dtype)[:, None].repeat(1, batch)
        sig_hat = torch.tensor(hats, device=device, dtype=dtype)[:, None].repeat(1, batch)
        first = levels[0]

    def step(i, x, sigma, sigma_next):
        if gammas[i] > 0:
            extra = math.sqrt(hats[i] ** 2 - levels[i] ** 2) * s_noise
            x = x + extra * randn(x.shape, generator=generator, device=device, dtype=dtype)
        s_hat = sig_hat[i]
        h = expand_like(sigma_next - s_hat, x)
        d = (x - denoiser(x=x, sigma=s_hat, **cond)) / expand_like(s_hat, x)
        x_next = torch.addcmul(x, h, d)
        if positive[i + 1]:
            d_next = (x_next - denoiser(x=x_next, sigma=sigma_next, **cond)) / expand_like(sigma_next, x)
            x_next = torch.addcmul(x, 0.5 * h, d + d_next)
        return x_next

    x_start = x_init if noise is None else (expand_like(first, noise) if sigmas.dim() == 2 else first) * noise
    return run_grid(step, x_start, sig.unbind(0), sigmas, return_trajectory=return_trajectory, callback=callback)
