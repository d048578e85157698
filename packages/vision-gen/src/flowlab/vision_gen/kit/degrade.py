"""A RealESRGAN-lite degradation: high-quality images to the low-quality inputs a super-resolution model learns from.

    lq = realesrgan_lite(hr, DegradationConfig(scale=4), generator=g)     # hr (B, C, H, W) in [-1, 1]

Per image, drawn from `generator`: an isotropic Gaussian blur of std U(blur), a bicubic (antialiased) x`scale`
downsampling, additive Gaussian noise of std U(noise) (in [0, 1] units), then JPEG at an integer quality U{jpeg}
through PIL (the kit's `jpeg` attack). The first-order pipeline of Real-ESRGAN (Wang et al. 2021), without its second
pass, sinc filters or Poisson noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from flowlab.core.config import Config
from flowlab.vision_gen.kit.attacks import jpeg
from flowlab.vision_gen.kit.data import from_unit, to_unit

__all__ = ["DegradationConfig", "gaussian_blur_per_image", "realesrgan_lite"]


def _range(value: tuple[float, float], name: str, low: float, high: float) -> None:
    ok = len(value) == 2 and all(isinstance(v, int | float) and math.isfinite(v) for v in value)
    if not ok or not low <= value[0] <= value[1] <= high:
        raise ValueError(f"{name}: expected a range (lo, hi) with {low} <= lo <= hi <= {high}, got {value!r}")


@dataclass(frozen=True)
class DegradationConfig(Config):
    """`scale`: the downsampling factor; `blur`: the blur std range in HR pixels; `noise`: the noise std range in
    [0, 1] units; `jpeg`: the JPEG quality range (integers, inclusive)."""

    scale: int = 4
    blur: tuple[float, float] = (0.2, 2.0)
    noise: tuple[float, float] = (0.0, 0.03)
    jpeg: tuple[int, int] = (30, 95)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.scale, bool) or not isinstance(self.scale, int) or self.scale < 1:
            raise ValueError(f"scale: expected an integer >= 1, got {self.scale!r}")
        _range(self.blur, "blur", 0.0, 16.0)
        _range(self.noise, "noise", 0.0, 1.0)
        _range(self.jpeg, "jpeg", 1, 100)
        if not all(isinstance(q, int) for q in self.jpeg):
            raise ValueError(f"jpeg: expected integer qualities, got {self.jpeg!r}")


def gaussian_blur_per_image(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """x: (B, C, H, W), sigma: (B,) >= 0 -> (B, C, H, W): each image blurred by its own isotropic Gaussian (separable,
    radius ceil(3 max sigma), reflect padding; sigma 0 leaves the image unchanged)."""
    b, c, h, w = x.shape
    radius = min(math.ceil(3 * float(sigma.max())), h - 1, w - 1)
    if radius < 1:
        return x
    k = torch.arange(-radius, radius + 1, device=x.device, dtype=x.dtype)
    s = sigma.to(x).clamp_min(1e-6)[:, None]
    taps = torch.exp(-(k**2) / (2 * s**2))
    taps = (taps / taps.sum(1, keepdim=True)).repeat_interleave(c, 0)  # (B C, 2 radius + 1)
    flat = F.pad(x.reshape(1, b * c, h, w), (radius, radius, radius, radius), mode="reflect")
    flat = F.conv2d(flat, taps[:, None, None, :], groups=b * c)
    flat = F.conv2d(flat, taps[:, None, :, None], groups=b * c)
    return flat.view(b, c, h, w)


def _uniform(n: int, bounds: tuple[float, float], generator: torch.Generator) -> torch.Tensor:
    return bounds[0] + (bounds[1] - bounds[0]) * torch.rand(n, generator=generator, dtype=torch.float64)


def realesrgan_lite(
    hr: torch.Tensor, config: DegradationConfig | None = None, *, generator: torch.Generator
) -> torch.Tensor:
    """hr: (B, C, H, W) in [-1, 1], H and W multiples of `config.scale` -> lq: (B, C, H / scale, W / scale) in
    [-1, 1], degraded as the module describes, deterministic given `generator` (a CPU generator)."""
    config = config or DegradationConfig()
    if not isinstance(config, DegradationConfig):
        raise ValueError(f"config: expected a DegradationConfig, got {type(config).__name__}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    if not isinstance(hr, torch.Tensor) or hr.dim() != 4 or not hr.is_floating_point() or hr.shape[0] < 1:
        raise ValueError(f"hr: expected a float tensor (B, C, H, W), got {getattr(hr, 'shape', type(hr).__name__)}")
    if hr.shape[1] not in (1, 3):
        raise ValueError(f"hr: expected 1 or 3 channels, got {hr.shape[1]}")
    r = config.scale
    if hr.shape[2] % r or hr.shape[3] % r or min(hr.shape[2:]) < 2 * r:
        raise ValueError(f"hr: expected H and W multiples of the scale {r} and at least {2 * r}, got {tuple(hr.shape)}")
    if not bool(torch.isfinite(hr).all()):
        raise ValueError("hr: expected finite values, got NaN or inf")
    n = hr.shape[0]
    sigma, noise = _uniform(n, config.blur, generator), _uniform(n, config.noise, generator)
    quality = torch.randint(config.jpeg[0], config.jpeg[1] + 1, (n,), generator=generator)
    eps = torch.randn((n, hr.shape[1], hr.shape[2] // r, hr.shape[3] // r), generator=generator)
    x = gaussian_blur_per_image(to_unit(hr), sigma)
    if r > 1:
        x = F.interpolate(x, scale_factor=1 / r, mode="bicubic", antialias=True, align_corners=False)
    x = (x + noise.to(x)[:, None, None, None] * eps.to(x)).clamp(0, 1)
    x = torch.cat([jpeg(x[i : i + 1], int(q)) for i, q in enumerate(quality.tolist())])
    return from_unit(x)
