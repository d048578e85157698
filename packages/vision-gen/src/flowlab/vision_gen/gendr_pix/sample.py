"""Inference: one forward, the plain two-pad ensemble or PadCFG, on images of any size (padded to a multiple of the
shuffle factor and cropped back), tile by tile when asked.

    hr = upscale(student, lq, scale=4, factor=4, mode="padcfg", weight=1.5)      # lq (B, 3, h, w) in [-1, 1]
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from flowlab.vision_gen.gendr_pix.data import upsample
from flowlab.vision_gen.gendr_pix.model import POSITIVE
from flowlab.vision_gen.gendr_pix.pixel_ops import Pads, crop_pads, pad_cfg, pad_to_multiple
from flowlab.vision_gen.kit.tiles import tiled

__all__ = ["MODES", "cfg_pads", "restore", "upscale"]

#: inference modes: one forward; two pads, both positive, averaged; PadCFG (weight omega, negative second branch)
MODES = ("single", "ensemble", "padcfg")
Model = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def cfg_pads(r: int) -> tuple[Pads, Pads]:
    """PadCFG's two pads for factor r: (h, h, h, h) and (h - 1, h + 1, h - 1, h + 1), h = r // 2 (the paper's
    [4, 4, 4, 4] and [3, 5, 3, 5] at r = 8): each keeps the side a multiple of r, the two grids shifted by one."""
    if isinstance(r, bool) or not isinstance(r, int) or r < 2:
        raise ValueError(f"r: expected a shuffle factor >= 2, got {r!r}")
    h = r // 2
    return (h, h, h, h), (h - 1, h + 1, h - 1, h + 1)


def restore(model: Model, x_up: torch.Tensor, *, factor: int, mode: str = "single", weight: float = 1.0):
    """x_up: (B, 3, H, W) of any size -> the model's output (B, 3, H, W): padded to multiples of `factor`, run in
    `mode` (MODES; `weight` is PadCFG's omega), cropped back."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    padded, pads = pad_to_multiple(x_up, factor)
    if mode == "single":
        c = torch.full((padded.shape[0],), POSITIVE, dtype=torch.long, device=padded.device)
        y = model(padded, c)
    else:
        w, negative = (0.5, False) if mode == "ensemble" else (weight, True)
        y = pad_cfg(model, padded, weight=w, pads=cfg_pads(factor), negative=negative)
    return crop_pads(y, pads)


@torch.no_grad()
def upscale(
    model: Model,
    lq: torch.Tensor,
    *,
    scale: int,
    factor: int,
    mode: str = "single",
    weight: float = 1.0,
    tile: int | None = None,
    overlap: int = 16,
) -> torch.Tensor:
    """lq: (B, 3, h, w) in [-1, 1] -> (B, 3, scale h, scale w) in [-1, 1]: bicubic x`scale`, then `restore`; with
    `tile`, on overlapping tile x tile windows of the upsampled image blended back (`kit.tiles.tiled`)."""
    if not isinstance(lq, torch.Tensor) or lq.dim() != 4 or lq.shape[1] != 3 or not lq.is_floating_point():
        raise ValueError(f"lq: expected float images (B, 3, h, w), got {getattr(lq, 'shape', type(lq).__name__)}")
    if not bool(torch.isfinite(lq).all()):
        raise ValueError("lq: expected finite values, got NaN or inf")
    x_up = upsample(lq, scale)

    def run(x: torch.Tensor) -> torch.Tensor:
        return restore(model, x, factor=factor, mode=mode, weight=weight)

    if tile is not None and max(x_up.shape[-2:]) > tile:
        return tiled(run, x_up, tile=tile, overlap=overlap, batch=1).clamp(-1, 1)
    return run(x_up).clamp(-1, 1)
