"""Sharpness as high-frequency energy: the mean Fourier power of an image above a radial frequency, a number that
blurring lowers and that is 0 for a flat image. Compare it with the same number on real images (a ratio) rather
than read it alone."""

from __future__ import annotations

import torch

from flowlab.core.validation import check_tensor

__all__ = ["high_frequency_energy"]


def high_frequency_energy(x: torch.Tensor, *, cutoff: float = 0.25) -> torch.Tensor:
    """x: (B, C, H, W) -> (B,): the power |F x|^2 (`torch.fft.fft2`, norm "ortho") per pixel and channel at radial
    frequencies above `cutoff` cycles per pixel (0 < cutoff < 0.5 * sqrt 2), summed over those frequencies and
    averaged over channels; by Parseval the whole sum over every frequency is the image's mean squared value."""
    check_tensor(x, "x", min_dim=4)
    if x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"x: expected float images (B, C, H, W), got {x.dtype} {tuple(x.shape)}")
    if not 0 < cutoff < 0.5 * 2**0.5:
        raise ValueError(f"cutoff: expected 0 < cutoff < 0.707 cycles per pixel, got {cutoff!r}")
    h, w = x.shape[-2:]
    fy, fx = torch.fft.fftfreq(h, device=x.device), torch.fft.fftfreq(w, device=x.device)
    high = (fy[:, None] ** 2 + fx[None] ** 2).sqrt() > cutoff
    power = torch.fft.fft2(x, norm="ortho").abs().square() / (h * w)
    return (power * high).sum((-2, -1)).mean(1)
