"""PNG files <-> image tensors: (B, C, H, W) float32 in [0, 1], one 8-bit file per image (1 channel: greyscale "L",
3: "RGB"). Reading checks every file before returning, and its ValueError names the file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

__all__ = ["read_image", "read_images", "write_images"]

#: PIL's mode of each channel count
_MODES = {1: "L", 3: "RGB"}


def read_image(path: str | os.PathLike[str], *, channels: int | None = None) -> torch.Tensor:
    """One PNG as (C, H, W) in [0, 1]: as `channels` (1 or 3) when given, else greyscale files as 1 channel and every
    other (RGB, RGBA, palette) as 3."""
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if channels not in (None, *_MODES):
        raise ValueError(f"channels: expected 1 or 3, got {channels!r}")
    if path.suffix.lower() != ".png":
        raise ValueError(f"{path}: expected a .png file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with Image.open(path) as im:
            if im.format != "PNG":
                raise ValueError(f"{path}: not a PNG (read as {im.format})")
            mode = _MODES[channels] if channels else ("L" if im.mode in ("1", "L", "I", "I;16") else "RGB")
            pixels = np.asarray(im.convert(mode))
    except (UnidentifiedImageError, OSError, SyntaxError) as err:
        raise ValueError(f"{path}: cannot be read as a PNG ({err})") from err
    x = torch.from_numpy(pixels.copy()).float().div(255)
    return x[None] if x.dim() == 2 else x.permute(2, 0, 1)


def read_images(paths: Sequence[str | os.PathLike[str]], *, shape: tuple[int, int, int] | None = None) -> torch.Tensor:
    """PNGs of one size as (B, C, H, W) in [0, 1]; `shape` (C, H, W), when given, is what every file must hold."""
    if not paths:
        raise ValueError("images: expected at least one PNG file")
    images = [read_image(p, channels=shape[0] if shape else None) for p in paths]
    want = tuple(shape) if shape else tuple(images[0].shape)
    for path, x in zip(paths, images, strict=True):
        if tuple(x.shape[1:]) != want[1:] or x.shape[0] != want[0]:
            got, need = "x".join(map(str, x.shape[1:][::-1])), "x".join(map(str, want[1:][::-1]))
            raise ValueError(f"{path}: the image is {got} with {x.shape[0]} channels, expected {need} with {want[0]}")
    return torch.stack(images)


def write_images(images: torch.Tensor, paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Write images (B, C, H, W) in [0, 1] (C 1 or 3; clamped, rounded to 8 bits) to the B `.png` paths."""
    from PIL import Image

    if images.dim() != 4 or images.shape[1] not in _MODES or images.shape[0] != len(paths):
        raise ValueError(f"images: expected ({len(paths)}, 1 or 3, H, W), got {tuple(images.shape)}")
    out = [Path(p) for p in paths]
    if any(p.suffix.lower() != ".png" for p in out):
        raise ValueError(f"paths: expected .png paths, got {[str(p) for p in out if p.suffix.lower() != '.png']}")
    pixels = images.detach().float().clamp(0, 1).mul(255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
    for path, arr in zip(out, pixels, strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr).save(path)
    return out
