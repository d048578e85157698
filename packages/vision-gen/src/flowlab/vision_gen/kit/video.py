"""Moving digits: short grayscale clips of scikit-learn digits drifting at a constant integer velocity and bouncing off
the frame edges (the toy video data of the video diffusion methods)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.validation import check_choice
from flowlab.vision_gen.kit.data import digits_split_indices, from_unit, load_digits_images

__all__ = ["VideoSet", "moving_digits"]


@dataclass(frozen=True)
class VideoSet:
    """x: (N, F, 1, S, S) clips in [-1, 1]; y: (N, D) int64 digit labels; positions: (N, F, D, 2) int64 (row, col) of
    each digit's top-left corner, in [0, S - digit_size]."""

    x: torch.Tensor
    y: torch.Tensor
    positions: torch.Tensor

    def __len__(self) -> int:
        return self.x.shape[0]


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _reflect(u: torch.Tensor, limit: int) -> torch.Tensor:
    """Fold unbounded integer positions u into [0, limit], reflecting at both ends (period 2 * limit)."""
    if limit == 0:
        return torch.zeros_like(u)
    q = torch.remainder(u, 2 * limit)
    return torch.where(q > limit, 2 * limit - q, q)


def _trajectories(
    n: int, frames: int, digits: int, limit: int, max_speed: int, generator: torch.Generator
) -> torch.Tensor:
    """(n, frames, digits, 2) positions: a uniform start in [0, limit]^2, a per-axis speed in {1..max_speed} with a
    random sign, reflected at the edges."""
    dev = generator.device
    start = torch.randint(limit + 1, (n, 1, digits, 2), generator=generator, device=dev)
    speed = torch.randint(1, max_speed + 1, (n, 1, digits, 2), generator=generator, device=dev)
    sign = 2 * torch.randint(2, (n, 1, digits, 2), generator=generator, device=dev) - 1
    t = torch.arange(frames, device=dev)[None, :, None, None]
    return _reflect(start + sign * speed * t, limit)


def _render(glyphs: torch.Tensor, positions: torch.Tensor, size: int) -> torch.Tensor:
    """glyphs: (N, D, d, d) in [0, 1], positions: (N, F, D, 2) -> (N, F, size, size), the digits composited by max."""
    n, frames, digits, _ = positions.shape
    d = glyphs.shape[-1]
    step = torch.arange(d, device=positions.device)
    rows = positions[..., 0, None, None] + step[:, None]  # (N, F, D, d, 1)
    cols = positions[..., 1, None, None] + step[None, :]  # (N, F, D, 1, d)
    index = (rows * size + cols).reshape(n * frames, digits * d * d)
    src = glyphs[:, None].expand(n, frames, digits, d, d).reshape(n * frames, digits * d * d)
    canvas = glyphs.new_zeros(n * frames, size * size)
    return canvas.scatter_reduce_(1, index, src, reduce="amax").reshape(n, frames, size, size)


def moving_digits(
    n: int,
    *,
    frames: int = 8,
    size: int = 16,
    digits: int = 1,
    digit_size: int = 8,
    split: str = "train",
    max_speed: int = 2,
    generator: torch.Generator,
) -> VideoSet:
    """n clips of `frames` frames (size x size) with `digits` digits each.

    Each digit is a uniformly drawn image of `load_digits_images(digit_size, split=split)` (intensity in [0, 1]),
    pasted at integer positions moving by a constant velocity (each axis: 1..max_speed pixels per frame, random sign)
    and reflected at the frame edges, so it never leaves the frame; overlapping digits are composited by max, then the
    clip is mapped to [-1, 1]. Tensors live on the generator's device.
    """
    _check_int(n, "n", 1)
    _check_int(frames, "frames", 1)
    _check_int(digits, "digits", 1)
    _check_int(max_speed, "max_speed", 1)
    if isinstance(digit_size, bool) or digit_size not in (8, 16, 32) or not isinstance(digit_size, int):
        raise ValueError(f"digit_size: expected 8, 16 or 32, got {digit_size!r}")
    _check_int(size, "size", digit_size)
    check_choice(split, tuple(digits_split_indices()), "split")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    pool = load_digits_images(digit_size, split=split, value_range=(0.0, 1.0))
    pick = torch.randint(len(pool), (n, digits), generator=generator, device=generator.device)
    glyphs = pool.x[:, 0].to(generator.device)[pick]  # (n, digits, d, d)
    positions = _trajectories(n, frames, digits, size - digit_size, max_speed, generator)
    x = from_unit(_render(glyphs, positions, size))[:, :, None]
    return VideoSet(x=x, y=pool.y.to(generator.device)[pick], positions=positions)
