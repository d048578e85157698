"""Small offline image data: scikit-learn digits (8x8, upsampled to 16x16 / 32x32) with a fixed stratified split.

The split (seed 0, stratified, 70/15/15: train 1257 / val 270 / test 270) is computed by scikit-learn's
`train_test_split` from a fixed seed, so every package sees the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["ImageSet", "digits_source", "digits_split_indices", "from_unit", "load_digits_images", "to_unit"]


@dataclass(frozen=True)
class ImageSet:
    """x: (N, C, H, W) images; y: (N,) int64 labels."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return self.x.shape[0]


def digits_source() -> Path:
    """The file scikit-learn's `load_digits` reads (bundled in its wheel): the input that artifact keys checksum."""
    return Path(str(files("sklearn.datasets") / "data" / "digits.csv.gz"))


@lru_cache(maxsize=1)
def digits_split_indices() -> dict[str, np.ndarray]:
    """Row positions of load_digits() for train / val / test (fixed: stratified, seed 0)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    y = load_digits().target
    idx = np.arange(len(y))
    train, rest = train_test_split(idx, test_size=540, stratify=y, random_state=0)
    val, test = train_test_split(rest, test_size=270, stratify=y[rest], random_state=0)
    return {"train": np.sort(train), "val": np.sort(val), "test": np.sort(test), "all": idx}


def load_digits_images(
    size: int = 8,
    *,
    split: str = "train",
    value_range: tuple[float, float] = (-1.0, 1.0),
    dtype: torch.dtype = torch.float32,
) -> ImageSet:
    """scikit-learn digits as (N, 1, size, size) images in `value_range` (bilinear upsampling, no antialias)."""
    from sklearn.datasets import load_digits

    if size not in (8, 16, 32):
        raise ValueError(f"size: expected 8, 16 or 32, got {size!r}")
    splits = digits_split_indices()
    if split not in splits:
        raise ValueError(f"split: expected one of {sorted(splits)}, got {split!r}")
    d = load_digits()
    rows = splits[split]
    x = torch.as_tensor(d.images[rows] / 16.0, dtype=torch.float64)[:, None]
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=False)
    lo, hi = value_range
    x = (lo + (hi - lo) * x.clamp(0, 1)).to(dtype)
    return ImageSet(x=x, y=torch.as_tensor(d.target[rows], dtype=torch.long))


def to_unit(x: torch.Tensor) -> torch.Tensor:
    """[-1, 1] -> [0, 1] (clamped)."""
    return ((x + 1) / 2).clamp(0, 1)


def from_unit(x: torch.Tensor) -> torch.Tensor:
    """[0, 1] -> [-1, 1]."""
    return 2 * x - 1
