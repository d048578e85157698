"""Fourier amplitudes of periodic grid artifacts: the masked Fourier-amplitude loss that suppresses them in training
(GenDR-Pix's MFS loss) and the periodic-artifact energy that measures them.

A pattern repeating every `period` pixels in an H x W image puts its energy at the frequencies (a H / period,
b W / period), a, b in {0, ..., period - 1}: the grid bins. Pixel-(un)shuffle by a factor r leaves its artifacts
there with period r. Amplitudes are those of `torch.fft.fft2(norm="ortho")`, so they do not depend on where the
pattern sits (a circular shift changes phases only).
"""

from __future__ import annotations

import torch

from flowlab.core.validation import check_tensor

__all__ = ["grid_frequency_mask", "masked_fourier_loss", "periodic_artifact_energy"]


def _check_images(x: object, name: str, period: int) -> torch.Tensor:
    check_tensor(x, name, min_dim=3)
    if x.dim() != 4 or not x.is_floating_point():
        raise ValueError(f"{name}: expected float images (B, C, H, W), got {x.dtype} {tuple(x.shape)}")
    if isinstance(period, bool) or not isinstance(period, int) or period < 2:
        raise ValueError(f"period: expected an integer >= 2, got {period!r}")
    if x.shape[2] % period or x.shape[3] % period:
        raise ValueError(f"{name}: expected H and W multiples of the period {period}, got {tuple(x.shape[2:])}")
    return x


def _cyclic_distance(n: int, step: int, device: torch.device) -> torch.Tensor:
    """(n,): the cyclic distance of each frequency index to the nearest multiple of `step`."""
    k = torch.arange(n, device=device) % step
    return torch.minimum(k, step - k)


def grid_frequency_mask(h: int, w: int, period: int, *, radius: int = 0, device: torch.device | str = "cpu"):
    """(h, w) bool in fft2 layout: the bins within Chebyshev distance `radius` of a grid bin (a h / period, b w /
    period), cyclically, without the DC bin (0, 0) (for radius 0) or its neighbourhood."""
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 0:
        raise ValueError(f"radius: expected an integer >= 0, got {radius!r}")
    device = torch.device(device)
    rows = _cyclic_distance(h, h // period, device)[:, None] <= radius
    cols = _cyclic_distance(w, w // period, device)[None, :] <= radius
    near_dc = (_cyclic_distance(h, h, device)[:, None] <= radius) & (_cyclic_distance(w, w, device)[None, :] <= radius)
    return rows & cols & ~near_dc


def _amplitude(x: torch.Tensor) -> torch.Tensor:
    return torch.fft.fft2(x.float(), norm="ortho").abs()


def masked_fourier_loss(
    y: torch.Tensor, y_ref: torch.Tensor, *, period: int, margin: float = 0.0, radius: int = 1
) -> torch.Tensor:
    """The masked Fourier-amplitude loss of y: (B, C, H, W) against y_ref (same shape, no gradient): the L1 of the
    amplitude excess |F(y)| - |F(y_ref)| over the bins near the grid (within `radius` of a grid bin of `period`)
    where it exceeds `margin`, summed over those bins and divided by their count, averaged over images and
    channels -> scalar. Zero when y has no excess amplitude on the grid; blind to a circular shift of y."""
    y = _check_images(y, "y", period)
    y_ref = _check_images(y_ref, "y_ref", period)
    if y_ref.shape != y.shape:
        raise ValueError(f"y_ref: expected the shape of y {tuple(y.shape)}, got {tuple(y_ref.shape)}")
    if not (isinstance(margin, int | float) and margin >= 0):
        raise ValueError(f"margin: expected a number >= 0, got {margin!r}")
    grid = grid_frequency_mask(*y.shape[2:], period, radius=radius, device=y.device)
    excess = _amplitude(y) - _amplitude(y_ref.detach())
    mask = grid & (excess.detach() > margin)
    return (excess * mask).abs().sum((-2, -1)).mean() / grid.sum()


def periodic_artifact_energy(y: torch.Tensor, *, period: int) -> torch.Tensor:
    """y: (B, C, H, W) -> (B,): the mean Fourier amplitude of each (mean-removed) image on the grid bins of `period`
    (DC excluded) over the mean amplitude of their non-grid neighbours (Chebyshev distance 1), averaged over
    channels. About 1 for white noise and for images without a period-`period` pattern; grows linearly with the
    amplitude of a planted one."""
    y = _check_images(y, "y", period)
    h, w = y.shape[2:]
    peaks = grid_frequency_mask(h, w, period, device=y.device)
    ring = grid_frequency_mask(h, w, period, radius=1, device=y.device) & ~peaks
    amp = _amplitude(y - y.mean((-2, -1), keepdim=True))
    on = (amp * peaks).sum((-2, -1)) / peaks.sum()
    off = (amp * ring).sum((-2, -1)) / ring.sum()
    return (on / off.clamp_min(1e-12)).mean(1)
