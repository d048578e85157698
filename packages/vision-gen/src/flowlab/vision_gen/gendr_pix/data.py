"""LQ-HQ pairs for super-resolution from the kit's photos: HR crops of one split of the photos (split by image),
degraded by the kit's RealESRGAN-lite pipeline, and the bicubic upsampling every model starts from."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from flowlab.vision_gen.kit.degrade import DegradationConfig, realesrgan_lite
from flowlab.vision_gen.kit.photos import photo_crops

__all__ = ["SRPairs", "sr_pairs", "upsample"]


@dataclass(frozen=True)
class SRPairs:
    """lq: (N, 3, S / scale, S / scale), x_up: its bicubic upsampling (N, 3, S, S), hr: (N, 3, S, S), all in [-1, 1]."""

    lq: torch.Tensor
    x_up: torch.Tensor
    hr: torch.Tensor

    def __len__(self) -> int:
        return self.hr.shape[0]


def upsample(lq: torch.Tensor, scale: int) -> torch.Tensor:
    """lq: (B, C, h, w) -> (B, C, scale h, scale w): bicubic, clamped to [-1, 1]."""
    return F.interpolate(lq, scale_factor=scale, mode="bicubic", align_corners=False).clamp(-1, 1)


def sr_pairs(split: str, size: int, n: int, degradation: DegradationConfig, *, seed: int) -> SRPairs:
    """n pairs from `size` x `size` HR crops of the `split` photos (crops and degradation drawn from `seed`)."""
    hr = photo_crops(split, size, n, seed=seed).x
    lq = realesrgan_lite(hr, degradation, generator=torch.Generator().manual_seed(seed + 1))
    return SRPairs(lq=lq, x_up=upsample(lq, degradation.scale), hr=hr)
