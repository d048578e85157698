"""Wrappers around raw networks: EDM / ECM preconditioning and classifier-free guidance."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flowlab.core.validation import check_tensor, expand_like

__all__ = ["ClassifierFreeGuidance", "ECMPreconditioner", "EDMPreconditioner", "PreconditionerCoefficients"]


@dataclass(frozen=True)
class PreconditionerCoefficients:
    """D(x; sigma) = c_skip x + c_out F(c_in x; c_noise); every field has sigma's shape (B,)."""

    c_skip: torch.Tensor
    c_out: torch.Tensor
    c_in: torch.Tensor
    c_noise: torch.Tensor


def _check_positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise ValueError(
            f"{name}: expected a finite {'non-negative' if allow_zero else 'positive'} number, got {value!r}"
        )
    return float(value)


def _check_sigma(sigma: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    check_tensor(x, "x", finite=False)
    if not isinstance(sigma, torch.Tensor) or sigma.dim() != 1 or sigma.shape[0] != x.shape[0]:
        shape = tuple(sigma.shape) if isinstance(sigma, torch.Tensor) else type(sigma).__name__
        raise ValueError(f"sigma: expected shape ({x.shape[0]},) (one noise level per sample), got {shape}")
    return sigma


class _Preconditioner(nn.Module):
    def __init__(self, net: nn.Module, sigma_data: float = 0.5) -> None:
        super().__init__()
        if not callable(net):
            raise ValueError(f"net: expected a callable network net(x=, t=, **cond), got {type(net).__name__}")
        self.net = net
        self.sigma_data = _check_positive(sigma_data, "sigma_data")

    def coefficients(self, sigma: torch.Tensor) -> PreconditionerCoefficients:
        raise NotImplementedError

    def forward(self, *, x: torch.Tensor, sigma: torch.Tensor, **cond: Any) -> torch.Tensor:
        _check_sigma(sigma, x)
        c = self.coefficients(sigma.to(x.dtype))
        raw = self.net(x=expand_like(c.c_in, x) * x, t=c.c_noise, **cond)
        return expand_like(c.c_skip, x) * x + expand_like(c.c_out, x) * raw


class EDMPreconditioner(_Preconditioner):
    """Karras et al. (2022) denoiser D(x; sigma) = c_skip x + c_out F(x=c_in x, t=c_noise, **cond).

    c_skip = sd^2/(sigma^2 + sd^2), c_out = sigma sd/sqrt(sigma^2 + sd^2), c_in = 1/sqrt(sigma^2 + sd^2),
    c_noise = ln(sigma)/4 with sd = sigma_data: the network's input and its effective target have unit
    variance for data of standard deviation sd. Called as `denoiser(x=x, sigma=sigma, **cond)`,
    x: (B, ...), sigma: (B,) > 0.
    The raw net receives c_noise as its `t`, which lies outside [0, 1] (the core nets accept any real t).
    """

    def coefficients(self, sigma: torch.Tensor) -> PreconditionerCoefficients:
        """sigma: (B,) -> the four coefficients, each (B,)."""
        sd2, s2 = self.sigma_data**2, sigma.square()
        return PreconditionerCoefficients(
            c_skip=sd2 / (s2 + sd2),
            c_out=sigma * self.sigma_data * (s2 + sd2).rsqrt(),
            c_in=(s2 + sd2).rsqrt(),
            c_noise=sigma.log() / 4,
        )


class ECMPreconditioner(_Preconditioner):
    """Consistency-model preconditioning of ECT/CMT (vision-gen--cmt.md §3): f(x; sigma) = c_skip x + c_out F.

    Training mode (`module.train()`): the EDM coefficients. Evaluation mode (`module.eval()`): shifted by
    sigma_min so that f(x; sigma_min) = x exactly, c_skip = sd^2/((sigma - sigma_min)^2 + sd^2) and
    c_out = (sigma - sigma_min) sd/sqrt(sigma^2 + sd^2); both modes use c_in = 1/sqrt(sigma^2 + sd^2) and
    c_noise = ln(sigma)/4.
    """

    def __init__(self, net: nn.Module, sigma_data: float = 0.5, sigma_min: float = 0.002) -> None:
        super().__init__(net, sigma_data)
        self.sigma_min = _check_positive(sigma_min, "sigma_min", allow_zero=True)

    def coefficients(self, sigma: torch.Tensor) -> PreconditionerCoefficients:
        """sigma: (B,) -> the four coefficients of the current (train / eval) mode, each (B,)."""
        sd, s2 = self.sigma_data, sigma.square()
        shift = 0.0 if self.training else self.sigma_min
        return PreconditionerCoefficients(
            c_skip=sd**2 / ((sigma - shift).square() + sd**2),
            c_out=(sigma - shift) * sd * (s2 + sd**2).rsqrt(),
            c_in=(s2 + sd**2).rsqrt(),
            c_noise=sigma.log() / 4,
        )

    def extra_repr(self) -> str:
        """`sigma_data` and `sigma_min`, for the module's repr."""
        return f"sigma_data={self.sigma_data:g}, sigma_min={self.sigma_min:g}"


class ClassifierFreeGuidance(nn.Module):
    """Guided field u = u_null + scale (u_cond - u_null), both branches in one batched call of `field`.

    Called like the field, `cfg(x=x, t=t, **cond)`. `null_cond` maps condition names to their "no condition"
    value, either per sample (same shape as the condition) or one unbatched value broadcast over the batch
    (e.g. `{"cond": torch.zeros(cond_dim)}`). Conditions not named in `null_cond`, and every other tensor
    keyword with a leading batch dimension (e.g. `s` of a flow map), are repeated unchanged in both halves;
    non-tensor keywords pass through. scale = 1 gives the conditional field, scale = 0 the unconditional one.
    """

    def __init__(self, field: nn.Module, *, scale: float, null_cond: Mapping[str, torch.Tensor]) -> None:
        super().__init__()
        if not callable(field):
            raise ValueError(f"field: expected a callable field(x=, t=, **cond), got {type(field).__name__}")
        if not (isinstance(scale, (int, float)) and math.isfinite(scale)):
            raise ValueError(f"scale: expected a finite number, got {scale!r}")
        if not isinstance(null_cond, Mapping) or not null_cond:
            raise ValueError("null_cond: expected a non-empty mapping from condition names to tensors")
        for key, value in null_cond.items():
            if key in ("x", "t") or not isinstance(value, torch.Tensor):
                raise ValueError(f"null_cond[{key!r}]: expected a tensor for a condition keyword other than x and t")
        self.field, self.scale, self.null_cond = field, float(scale), dict(null_cond)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x: (B, ...), t: (B,) -> the guided field u_null + scale (u_cond - u_null): (B, ...)."""
        check_tensor(x, "x", finite=False)
        batch = x.shape[0]
        missing = sorted(set(self.null_cond) - set(cond))
        if missing:
            raise ValueError(f"cond: missing guided condition(s) {missing} named in null_cond")
        doubled: dict[str, Any] = {}
        for key, value in cond.items():
            if key in self.null_cond:
                doubled[key] = torch.cat([value, self._null(key, value, batch)])
            elif isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == batch:
                doubled[key] = torch.cat([value, value])
            else:
                doubled[key] = value
        out = self.field(x=torch.cat([x, x]), t=torch.cat([t, t]), **doubled)
        conditional, unconditional = out[:batch], out[batch:]
        return unconditional + self.scale * (conditional - unconditional)

    def _null(self, key: str, value: torch.Tensor, batch: int) -> torch.Tensor:
        if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != batch:
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"{key}: expected a tensor with batch size {batch} (a guided condition), got {shape}")
        null = self.null_cond[key].to(device=value.device, dtype=value.dtype)
        if null.shape == value.shape:
            return null
        if null.shape == value.shape[1:]:
            return null.expand_as(value)
        raise ValueError(
            f"null_cond[{key!r}]: expected shape {tuple(value.shape)} or {tuple(value.shape[1:])}, "
            f"got {tuple(null.shape)}"
        )

    def extra_repr(self) -> str:
        """`scale` and the names of the guided conditions, for the module's repr."""
        return f"scale={self.scale:g}, null_cond={sorted(self.null_cond)}"
