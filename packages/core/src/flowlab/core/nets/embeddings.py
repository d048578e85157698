"""Embeddings of scalar times (and low-dimensional coordinates) into feature vectors."""

from __future__ import annotations

import math

import torch
from torch import nn

from flowlab.core.validation import check_tensor

__all__ = ["FourierFeatures", "SinusoidalEmbedding", "check_time_shape"]


def check_time_shape(t: torch.Tensor, batch: int, name: str = "t") -> torch.Tensor:
    """Check `t: (B,)` is a floating tensor with one entry per sample (shape only: no host synchronisation).

    Networks accept any real time: wrappers such as `EDMPreconditioner` feed c_noise = ln(sigma)/4, which lies
    outside [0, 1]. Range checks belong to samplers and paths.
    """
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor of shape ({batch},), got {type(t).__name__}")
    if t.dim() != 1 or t.shape[0] != batch:
        raise ValueError(f"{name}: expected shape ({batch},) (one time per sample), got {tuple(t.shape)}")
    if not t.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {t.dtype}")
    return t


class SinusoidalEmbedding(nn.Module):
    """Transformer-style e(t) = [cos(w_k a t), sin(w_k a t)] with w_k = max_period^(-k/(dim/2)), k < dim/2.

    `scale` (a) stretches t before embedding: 1000 makes t in [0, 1] resolve like the integer steps of DDPM.
    t: (B,) -> (B, dim). Every entry lies in [-1, 1] and <e(t), e(u)> depends only on t - u.
    """

    def __init__(self, dim: int, max_period: float = 10_000, *, scale: float = 1.0) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim < 2 or dim % 2:
            raise ValueError(f"dim: expected an even integer >= 2, got {dim!r}")
        if not max_period > 1:
            raise ValueError(f"max_period: expected a number > 1, got {max_period!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: expected a finite positive number, got {scale!r}")
        self.dim, self.max_period, self.scale = dim, float(max_period), float(scale)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        """t: (B,) -> the embedding `[cos(w_k a t), sin(w_k a t)]`: (B, dim)."""
        if not isinstance(t, torch.Tensor) or t.dim() != 1:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"t: expected shape (B,), got {shape}")
        dtype = t.dtype if t.is_floating_point() else torch.get_default_dtype()
        half = self.dim // 2
        k = torch.arange(half, device=t.device, dtype=dtype)
        freqs = torch.exp(k * (-math.log(self.max_period) / half))
        angles = (self.scale * t.to(dtype))[:, None] * freqs
        return torch.cat([angles.cos(), angles.sin()], dim=-1)

    def extra_repr(self) -> str:
        """`dim`, `max_period` and `scale`, for the module's repr."""
        return f"dim={self.dim}, max_period={self.max_period:g}, scale={self.scale:g}"


class FourierFeatures(nn.Module):
    """Random Fourier features [cos(2 pi v W), sin(2 pi v W)], fixed W ~ N(0, scale^2): (in_features, dim/2).

    W is a registered buffer (in the state_dict, never trained). v: (B,) or (B, in_features) -> (B, dim).
    """

    def __init__(
        self, dim: int, scale: float = 16.0, *, in_features: int = 1, generator: torch.Generator | None = None
    ) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim < 2 or dim % 2:
            raise ValueError(f"dim: expected an even integer >= 2, got {dim!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: expected a finite positive number, got {scale!r}")
        if not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features: expected a positive integer, got {in_features!r}")
        self.dim, self.scale, self.in_features = dim, float(scale), in_features
        device = generator.device if generator is not None else None
        weight = torch.randn(in_features, dim // 2, generator=generator, device=device) * self.scale
        self.register_buffer("weight", weight.cpu())

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        """v: (B,) or (B, in_features) -> the features `[cos(2 pi v W), sin(2 pi v W)]`: (B, dim)."""
        check_tensor(v, "v", finite=False)
        if v.dim() == 1:
            v = v[:, None]
        if v.dim() != 2 or v.shape[1] != self.in_features:
            raise ValueError(f"v: expected shape (B,) or (B, {self.in_features}), got {tuple(v.shape)}")
        angles = 2 * math.pi * (v @ self.weight.to(device=v.device, dtype=v.dtype))
        return torch.cat([angles.cos(), angles.sin()], dim=-1)

    def extra_repr(self) -> str:
        """`dim`, `scale` and `in_features`, for the module's repr."""
        return f"dim={self.dim}, scale={self.scale:g}, in_features={self.in_features}"
