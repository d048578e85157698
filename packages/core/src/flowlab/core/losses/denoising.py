"""Denoising objectives: sigma-weighted denoising score matching on an affine path, the DDPM epsilon loss on a
discrete schedule, and the EDM loss."""

from __future__ import annotations

import math
from typing import Any

import torch

from flowlab.core.distributions import Generators, randint, randn
from flowlab.core.losses.flow_matching import REDUCTIONS, check_prediction, reduce_loss
from flowlab.core.paths.affine import AffinePath
from flowlab.core.schedules import DiscreteVP
from flowlab.core.validation import check_choice, check_tensor, check_time, expand_like

__all__ = ["ddpm_loss", "denoising_score_loss", "edm_loss", "edm_weight"]


def denoising_score_loss(
    score: Any,
    x_1: torch.Tensor,
    t: torch.Tensor,
    path: AffinePath,
    *,
    generator: Generators = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """||sigma_t s_theta(x_t, t) + x_0||^2 per sample (DSM with the sigma_t^2 weighting, VE/VP alike).

    score: a model `score(x=x_t, t=t, **cond) -> (B, ...)` of grad log p_t; x_1: (B, ...) data; t: (B,);
    path: an AffinePath with a Gaussian source, x_t = alpha_t x_1 + sigma_t x_0, x_0 ~ N(0, I) drawn with
    `generator`; weight: (B,).
    """
    if not isinstance(path, AffinePath):
        raise ValueError(f"path: expected an AffinePath, got {type(path).__name__}")
    if not path.gaussian_source:
        raise ValueError("path: denoising score matching needs a Gaussian source (gaussian_source=True)")
    check_tensor(x_1, "x_1")
    check_time(t, x_1.shape[0])
    x_0 = randn(x_1.shape, generator=generator, device=x_1.device, dtype=x_1.dtype)
    s = path.sample(x_0, x_1, t)
    prediction = score(x=s.x_t, t=t, **cond)
    check_prediction(prediction, x_1, "score")
    sigma = path.schedule(expand_like(t, x_1)).sigma
    per_sample = (sigma * prediction + x_0).square().flatten(1).sum(1)
    return reduce_loss(per_sample, weight=weight, reduction=reduction)


def ddpm_loss(
    model: Any,
    x: torch.Tensor,
    schedule: DiscreteVP,
    *,
    generator: torch.Generator | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Ho et al. (2020)'s simple loss on a discrete schedule: k ~ U{0, ..., K-1}, t = schedule.time_of(k),
    x_t = alpha_t x + sigma_t eps, and per sample the mean over its elements of (eps_theta(x_t, t) - eps)^2.

    model: `model(x=x_t, t=t, **cond) -> (B, ...)` the predicted eps, called with t: (B,) float64 core times (the
    grid's exact times, so a diffusers UNet gets back integer timesteps; cast in the model as needed); x: (B, ...)
    data; generator draws k (B,) first, then eps (B, ...), on its own device; weight: (B,) multiplies the per-sample
    losses; reduction "mean" (over the batch; unweighted, the mean over every element, the same number), "sum" or
    "none" (the (B,) per-sample losses).
    """
    if not isinstance(schedule, DiscreteVP):
        raise ValueError(f"schedule: expected a DiscreteVP (a discrete DDPM schedule), got {type(schedule).__name__}")
    check_tensor(x, "x")
    check_choice(reduction, REDUCTIONS, "reduction")
    k = randint(schedule.num_steps, (x.shape[0],), generator=generator, device=x.device)
    t = schedule.time_of(k.to(torch.float64))
    out = schedule(t)
    eps = randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
    x_t = expand_like(out.alpha.to(x.dtype), x) * x + expand_like(out.sigma.to(x.dtype), x) * eps
    prediction = model(x=x_t, t=t, **cond)
    check_prediction(prediction, x, "model")
    error = (prediction - eps).square()
    if weight is None and reduction == "mean":
        return error.mean()
    return reduce_loss(error.flatten(1).mean(1), weight=weight, reduction=reduction)


def edm_weight(sigma: torch.Tensor, sigma_data: float) -> torch.Tensor:
    """EDM loss weight lambda(sigma) = (sigma^2 + sigma_data^2) / (sigma sigma_data)^2, elementwise."""
    return (sigma.square() + sigma_data**2) / (sigma * sigma_data).square()


def edm_loss(
    denoiser: Any,
    x: torch.Tensor,
    *,
    P_mean: float = -1.2,
    P_std: float = 1.2,
    sigma_data: float = 0.5,
    generator: Generators = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Karras et al. (2022): lambda(sigma) ||D(x + sigma n; sigma) - x||^2 with ln sigma ~ N(P_mean, P_std^2).

    denoiser: `denoiser(x=x_noisy, sigma=sigma, **cond) -> (B, ...)` (e.g. an EDMPreconditioner); x: (B, ...)
    clean data; generator draws ln sigma (B,) first, then n ~ N(0, I); weight: (B,) multiplies lambda(sigma).
    """
    check_tensor(x, "x")
    for name, value in (("P_mean", P_mean), ("P_std", P_std), ("sigma_data", sigma_data)):
        if not (isinstance(value, int | float) and math.isfinite(value)):
            raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if P_std < 0:
        raise ValueError(f"P_std: expected a non-negative standard deviation, got {P_std!r}")
    if sigma_data <= 0:
        raise ValueError(f"sigma_data: expected a positive data standard deviation, got {sigma_data!r}")
    kw = {"generator": generator, "device": x.device, "dtype": x.dtype}
    sigma = torch.exp(P_mean + P_std * randn((x.shape[0],), **kw))
    noise = randn(x.shape, **kw)
    denoised = denoiser(x=x + expand_like(sigma, x) * noise, sigma=sigma, **cond)
    check_prediction(denoised, x, "denoiser")
    per_sample = edm_weight(sigma, sigma_data) * (denoised - x).square().flatten(1).sum(1)
    return reduce_loss(per_sample, weight=weight, reduction=reduction)
