"""Tiled inference for images larger than memory allows: overlapping tiles through a model, blended back with linear
ramps over the overlaps so that no seam shows.

    y = tiled(model, x, tile=256, overlap=32, scale=1)     # x (B, C, H, W) -> y (B, C', scale H, scale W)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["tile_starts", "tiled"]


def tile_starts(size: int, tile: int, overlap: int) -> list[int]:
    """The start of each tile along an axis of `size`: every tile - overlap, the last one flush with the end."""
    if size <= tile:
        return [0]
    starts = list(range(0, size - tile, tile - overlap))
    return [*starts, size - tile]


def _ramp(length: int, overlap: int, first: bool, last: bool, device: torch.device) -> torch.Tensor:
    """(length,): 1 inside, rising linearly over the first `overlap` entries unless `first` (an image border) and
    falling over the last ones unless `last`."""
    w = torch.ones(length, device=device)
    if overlap > 0:
        up = (torch.arange(overlap, device=device) + 0.5) / overlap
        if not first:
            w[:overlap] = torch.minimum(w[:overlap], up)
        if not last:
            w[-overlap:] = torch.minimum(w[-overlap:], up.flip(0))
    return w


def _check(x: object, tile: int, overlap: int, scale: int, batch: int) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[0] < 1:
        raise ValueError(f"x: expected a tensor (B, C, H, W), got {getattr(x, 'shape', type(x).__name__)}")
    for name, value, low in (("tile", tile, 1), ("overlap", overlap, 0), ("scale", scale, 1), ("batch", batch, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    if 2 * overlap >= tile:
        raise ValueError(f"overlap: expected less than half the tile {tile}, got {overlap}")


def tiled(
    fn: Callable[[torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    *,
    tile: int,
    overlap: int,
    scale: int = 1,
    batch: int = 16,
) -> torch.Tensor:
    """fn applied to x: (B, C, H, W) tile by tile: tiles of tile x tile (smaller where the image is), `overlap`
    pixels shared between neighbours, sent through `fn` (tile_batch, C, t, t) -> (tile_batch, C', scale t, scale t)
    up to `batch` images at a time; each output tile weighted by separable linear ramps over its shared borders and
    the weighted sum normalised. Equal to fn(x) for a pointwise fn; close to it when fn's receptive field is well
    inside the overlap."""
    _check(x, tile, overlap, scale, batch)
    b, _, h, w = x.shape
    th, tw = min(tile, h), min(tile, w)
    rows, cols = tile_starts(h, th, overlap), tile_starts(w, tw, overlap)
    windows = [(i, j) for i in rows for j in cols]
    pieces = torch.cat([x[:, :, i : i + th, j : j + tw] for i, j in windows])  # (T B, C, th, tw)
    outs = torch.cat([fn(chunk) for chunk in pieces.split(batch)])
    if outs.shape[0] != pieces.shape[0] or outs.shape[-2:] != (scale * th, scale * tw):
        raise ValueError(f"fn: expected tiles of {(scale * th, scale * tw)} for inputs of {(th, tw)}, got "
                         f"{tuple(outs.shape)}")  # fmt: skip
    out = outs.new_zeros(b, outs.shape[1], scale * h, scale * w)
    norm = outs.new_zeros(1, 1, scale * h, scale * w)
    s, o = scale, scale * overlap
    for k, (i, j) in enumerate(windows):
        wr = _ramp(s * th, o, i == 0, i + th == h, outs.device)
        wc = _ramp(s * tw, o, j == 0, j + tw == w, outs.device)
        weight = wr[:, None] * wc[None, :]
        out[:, :, s * i : s * (i + th), s * j : s * (j + tw)] += outs[k * b : (k + 1) * b] * weight
        norm[:, :, s * i : s * (i + th), s * j : s * (j + tw)] += weight
    return out / norm
