"""One model, samplers of either family: rectified-flow time t <-> EDM noise level sigma.

The rectified-flow (CondOT) path x_t = t x_1 + (1 - t) x_0 and the EDM path x_sigma = x_1 + sigma x_0 are the same
path up to a scale: x_sigma = x_t / t with sigma = (1 - t) / t, t = 1 / (1 + sigma). So a velocity field
v(x_t, t) (what a rectified-flow teacher predicts) and a denoiser D(x_sigma; sigma) = E[x_1 | x_sigma] (what an
EDM teacher predicts) convert exactly into each other:

    D = x_t + (1 - t) v                  (x_t = t x_sigma)
    v = D - (x_sigma - D) / sigma        (= (D - x_t) / (1 - t))

`VelocityAsDenoiser` lets `solvers.edm_sample` run a rectified-flow teacher; `DenoiserAsVelocity` lets
`solvers.solve_ode` (and every flow-map or distillation recipe that wants a velocity) run an EDM teacher. An Euler
step in t and an Euler step in sigma are both the DDIM step of this path, so on matching grids the two families
give the same samples to float rounding; higher-order solvers agree as their grids are refined.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from flowlab.core.validation import check_tensor, expand_like

__all__ = ["DenoiserAsVelocity", "VelocityAsDenoiser", "rf_sigma", "rf_time"]


def rf_sigma(t: torch.Tensor) -> torch.Tensor:
    """The EDM noise level of rectified-flow time t in (0, 1]: sigma = (1 - t) / t (t = 1 -> 0, t -> 0 -> inf)."""
    check_tensor(t, "t", min_dim=0)
    if bool(((t <= 0) | (t > 1)).any()):
        raise ValueError("t: expected rectified-flow times in (0, 1] (t = 0 is sigma = inf)")
    return (1 - t) / t


def rf_time(sigma: torch.Tensor) -> torch.Tensor:
    """The rectified-flow time of an EDM noise level sigma >= 0: t = 1 / (1 + sigma)."""
    check_tensor(sigma, "sigma", min_dim=0)
    if bool((sigma < 0).any()):
        raise ValueError("sigma: expected noise levels >= 0")
    return 1 / (1 + sigma)


class VelocityAsDenoiser(nn.Module):
    """A rectified-flow velocity field as an EDM denoiser: `denoiser(x=x_sigma, sigma=sigma, **cond) -> (B, ...)`.

    field: `field(x=x_t, t=t, **cond)`, the velocity x_1 - x_0 of the CondOT path; sigma: (B,) >= 0.
    """

    def __init__(self, field: Any) -> None:
        super().__init__()
        if not callable(field):
            raise ValueError(f"field: expected a callable velocity field(x=, t=), got {type(field).__name__}")
        self.field = field

    def forward(self, *, x: torch.Tensor, sigma: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x_sigma: (B, ...), sigma: (B,) -> the denoised x_t + (1 - t) v(x_t, t): (B, ...),
        with t = 1 / (1 + sigma) and x_t = t x_sigma."""
        _check_levels(sigma, x, "sigma")
        t = rf_time(sigma.to(x.dtype))
        x_t = expand_like(t, x) * x
        return x_t + expand_like(1 - t, x) * self.field(x=x_t, t=t, **cond)


class DenoiserAsVelocity(nn.Module):
    """An EDM denoiser as a rectified-flow velocity field: `field(x=x_t, t=t, **cond) -> (B, ...)`.

    denoiser: `denoiser(x=x_sigma, sigma=sigma, **cond)` -> E[x_1 | x_sigma]; t: (B,) in (0, 1]. The denoiser
    is called at sigma = max(rf_sigma(t), sigma_min): an EDM model is trained down to sigma_min only, and at
    t = 1 (sigma = 0) the velocity's 0/0 form needs a positive level. sigma_min = 0 gives the exact conversion for
    every t < 1.
    """

    def __init__(self, denoiser: Any, *, sigma_min: float = 0.002) -> None:
        super().__init__()
        if not callable(denoiser):
            raise ValueError(f"denoiser: expected a callable denoiser(x=, sigma=), got {type(denoiser).__name__}")
        if not (isinstance(sigma_min, int | float) and sigma_min >= 0):
            raise ValueError(f"sigma_min: expected a number >= 0, got {sigma_min!r}")
        self.denoiser, self.sigma_min = denoiser, float(sigma_min)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x_t: (B, ...), t: (B,) -> the velocity D - (x_sigma - D) / sigma with x_sigma = x_t / t: (B, ...)."""
        _check_levels(t, x, "t")
        tt = t.to(x.dtype)
        sigma = rf_sigma(tt)
        if self.sigma_min > 0:
            sigma = sigma.clamp_min(self.sigma_min)
        elif bool((sigma == 0).any()):
            raise ValueError("t: t = 1 (sigma = 0) needs sigma_min > 0")
        x_sigma = x / expand_like(tt, x)
        data = self.denoiser(x=x_sigma, sigma=sigma, **cond)
        return data - (x_sigma - data) / expand_like(sigma, x)

    def extra_repr(self) -> str:
        """`sigma_min`, for the module's repr."""
        return f"sigma_min={self.sigma_min:g}"


def _check_levels(levels: Any, x: torch.Tensor, name: str) -> None:
    check_tensor(x, "x")
    if not isinstance(levels, torch.Tensor) or tuple(levels.shape) != (x.shape[0],):
        shape = tuple(levels.shape) if isinstance(levels, torch.Tensor) else type(levels).__name__
        raise ValueError(f"{name}: expected shape ({x.shape[0]},) (one value per sample), got {shape}")
