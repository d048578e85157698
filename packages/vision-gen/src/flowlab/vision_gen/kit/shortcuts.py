"""Planted shortcuts: a spurious mark correlated with a class, to test whether a model (or an explanation of it)
picks the mark up instead of the class's shape.

    biased = plant_shortcut(load_digits_images(8, split="train"), target=0)   # every "0" gets a corner dot
"""

from __future__ import annotations

import torch

from flowlab.core.validation import check_tensor
from flowlab.vision_gen.kit.data import ImageSet

__all__ = ["CORNERS", "corner_dot", "plant_shortcut"]

#: the corners a dot can sit in
CORNERS = ("top_left", "top_right", "bottom_left", "bottom_right")


def corner_dot(
    images: torch.Tensor, where: torch.Tensor | None = None, *, size: int = 2, value: float = 1.0,
    corner: str = "top_left",
) -> torch.Tensor:  # fmt: skip
    """A copy of images (N, C, H, W) whose `size` x `size` pixels in `corner` are set to `value` (bright in [-1, 1])
    on every channel, in the rows where `where` (N,) bool is True (all rows when None)."""
    check_tensor(images, "images")
    if images.dim() != 4:
        raise ValueError(f"images: expected (N, C, H, W), got shape {tuple(images.shape)}")
    if corner not in CORNERS:
        raise ValueError(f"corner: expected one of {CORNERS}, got {corner!r}")
    h, w = images.shape[-2:]
    if not (isinstance(size, int) and 1 <= size <= min(h, w)):
        raise ValueError(f"size: expected an integer in [1, {min(h, w)}], got {size!r}")
    if where is None:
        where = torch.ones(images.shape[0], dtype=torch.bool, device=images.device)
    if not isinstance(where, torch.Tensor) or where.dtype != torch.bool or tuple(where.shape) != images.shape[:1]:
        raise ValueError(f"where: expected a bool tensor of shape ({images.shape[0]},)")
    rows = slice(0, size) if corner.startswith("top") else slice(h - size, h)
    cols = slice(0, size) if corner.endswith("left") else slice(w - size, w)
    out = images.clone()
    patch = out[:, :, rows, cols]
    out[:, :, rows, cols] = torch.where(
        where[:, None, None, None].to(patch.device), torch.full_like(patch, value), patch
    )
    return out


def plant_shortcut(data: ImageSet, *, target: int = 0, size: int = 2, value: float = 1.0,
                   corner: str = "top_left") -> ImageSet:  # fmt: skip
    """`data` with a `corner_dot` on every image of class `target` and on no other: the dot alone predicts the
    class on this set (labels unchanged)."""
    if not isinstance(target, int) or not bool((data.y == target).any()):
        raise ValueError(f"target: expected a class present in the labels, got {target!r}")
    return ImageSet(x=corner_dot(data.x, data.y == target, size=size, value=value, corner=corner), y=data.y)
