"""One model, samplers in sigma and in core time: EDM noise level sigma <-> the core time t of any `Schedule`.

A schedule's state x_t = alpha_t x_1 + sigma_t x_0 is the EDM state x_sigma = x_1 + sigma x_0 scaled by alpha_t, at
the noise level sigma = sigma_t / alpha_t (the inverse square root of the SNR). So an EDM denoiser D(x_sigma;
sigma) = E[x_1 | x_sigma] is a data-predicting model over core time, and back:

    model(x_t, t)  = D(x_t / alpha_t; sigma_t / alpha_t)            (`DenoiserAsTimeModel`)
    D(x; sigma)    = model(alpha_t x, t) with t = snr_inverse(1 / sigma)   (`TimeModelAsDenoiser`)

With the `EDM` schedule (alpha = 1) the first is D(x_t; sigma(t)), and `sample_diffusion(model, ...,
schedule=EDM(), prediction="data")` runs DPM-Solver++ on an EDM denoiser with the grid of `grids.logsnr_uniform`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from flowlab.core.schedules import Schedule
from flowlab.core.validation import check_tensor, expand_like

__all__ = ["DenoiserAsTimeModel", "TimeModelAsDenoiser"]


def _check_schedule(schedule: Any) -> Schedule:
    if not isinstance(schedule, Schedule):
        raise ValueError(f"schedule: expected a flowlab.core.schedules.Schedule, got {type(schedule).__name__}")
    return schedule


def _check_per_sample(value: Any, x: torch.Tensor, name: str) -> torch.Tensor:
    check_tensor(x, "x", finite=False)
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != (x.shape[0],):
        shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(f"{name}: expected shape ({x.shape[0]},) (one value per sample), got {shape}")
    return value


class DenoiserAsTimeModel(nn.Module):
    """An EDM denoiser as a data-predicting model over core time: `model(x=x_t, t=t, **cond) -> (B, ...)`.

    denoiser: `denoiser(x=x_sigma, sigma=(B,), **cond)` -> E[x_1 | x_sigma]; t: (B,) times where alpha_t > 0 and
    sigma_t > 0. The prediction is `Prediction.DATA` (pass `prediction="data"` to the diffusion samplers).
    """

    def __init__(self, denoiser: Any, schedule: Schedule) -> None:
        super().__init__()
        if not callable(denoiser):
            raise ValueError(f"denoiser: expected a callable denoiser(x=, sigma=), got {type(denoiser).__name__}")
        self.denoiser, self.schedule = denoiser, _check_schedule(schedule)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x_t: (B, ...), t: (B,) -> the data prediction D(x_t / alpha_t; sigma_t / alpha_t): (B, ...)."""
        _check_per_sample(t, x, "t")
        out = self.schedule(t.to(torch.float64))
        if bool((out.alpha <= 0).any()) or bool((out.sigma <= 0).any()):
            raise ValueError("t: expected times with alpha_t > 0 and sigma_t > 0 (a finite, positive EDM level)")
        alpha = out.alpha.to(x.dtype)
        sigma = (out.sigma / out.alpha).to(x.dtype)
        return self.denoiser(x=x / expand_like(alpha, x), sigma=sigma, **cond)


class TimeModelAsDenoiser(nn.Module):
    """A data-predicting model over core time as an EDM denoiser: `denoiser(x=x_sigma, sigma=(B,) > 0, **cond)`.

    model: `model(x=x_t, t=t, **cond)` -> E[x_1 | x_t] on `schedule`; each sigma is mapped to the time whose SNR
    alpha_t / sigma_t is 1 / sigma (float64), and the state is scaled by alpha_t. Inverse of `DenoiserAsTimeModel`.
    """

    def __init__(self, model: Any, schedule: Schedule) -> None:
        super().__init__()
        if not callable(model):
            raise ValueError(f"model: expected a callable model(x=, t=), got {type(model).__name__}")
        self.model, self.schedule = model, _check_schedule(schedule)

    def forward(self, *, x: torch.Tensor, sigma: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x_sigma: (B, ...), sigma: (B,) -> model(alpha_t x_sigma, t) with t = snr_inverse(1 / sigma): (B, ...)."""
        _check_per_sample(sigma, x, "sigma")
        if bool((sigma <= 0).any()) or not bool(torch.isfinite(sigma).all()):
            raise ValueError("sigma: expected finite noise levels > 0")
        t = self.schedule.snr_inverse(1 / sigma.to(torch.float64))
        alpha = self.schedule(t).alpha.to(x.dtype)
        return self.model(x=expand_like(alpha, x) * x, t=t.to(x.dtype), **cond)
