"""The sparse attention patterns of DSA's two head types over frames-major video tokens (`TokenLayout`):
spatial heads attend within a window of frames (optionally within a patch radius), temporal heads attend to nearby
patch positions in every frame, and both attend to the attention-sink tokens at the start of the sequence."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.config import Config
from flowlab.core.nets import TokenLayout

__all__ = [
    "SparsePattern",
    "head_masks",
    "mask_density",
    "pattern_for_sparsity",
    "spatial_mask",
    "temporal_mask",
]


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class SparsePattern(Config):
    """The masks of both head types: spatial heads see frames within `window` of their own (and, with
    `spatial_radius` >= 0, only patches within that Chebyshev radius; -1: the whole frame); temporal heads see
    patches within `temporal_radius` of their own in every frame; every head sees the first `sinks` tokens."""

    window: int = 1
    spatial_radius: int = -1
    temporal_radius: int = 0
    sinks: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int(self.window, "window", 0)
        _check_int(self.spatial_radius, "spatial_radius", -1)
        _check_int(self.temporal_radius, "temporal_radius", 0)
        _check_int(self.sinks, "sinks", 0)

    def check_layout(self, layout: TokenLayout) -> None:
        """Raise if the pattern does not fit `layout`: a window past the frames or more sinks than tokens."""
        if self.window >= layout.frames and layout.frames > 1:
            raise ValueError(f"window: expected fewer than the {layout.frames} frames, got {self.window}")
        if self.sinks > layout.num_tokens:
            raise ValueError(f"sinks: expected at most the {layout.num_tokens} tokens, got {self.sinks}")


def _positions(layout: TokenLayout, device: torch.device | str | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) frame and (N, 2) patch (row, col) of every token."""
    n = torch.arange(layout.num_tokens, device=device)
    within = n % layout.tokens_per_frame
    return n // layout.tokens_per_frame, torch.stack([within // layout.width, within % layout.width], dim=-1)


def _chebyshev(p: torch.Tensor) -> torch.Tensor:
    """(N, 2) positions -> (N, N) Chebyshev distances."""
    return (p[:, None, :] - p[None, :, :]).abs().amax(dim=-1)


def _with_sinks(mask: torch.Tensor, sinks: int) -> torch.Tensor:
    mask[:, :sinks] = True
    return mask


def spatial_mask(
    layout: TokenLayout, *, window: int, radius: int = -1, sinks: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """(N, N) bool, True = attend: query in frame f sees keys in frames f' with |f - f'| <= window (patches within
    Chebyshev `radius` of its own when radius >= 0), and the first `sinks` tokens."""
    SparsePattern(window=window, spatial_radius=radius, sinks=sinks).check_layout(layout)
    frame, pos = _positions(layout, device)
    mask = (frame[:, None] - frame[None, :]).abs() <= window
    if radius >= 0:
        mask &= _chebyshev(pos) <= radius
    return _with_sinks(mask, sinks)


def temporal_mask(
    layout: TokenLayout, *, radius: int, sinks: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """(N, N) bool, True = attend: query at patch u sees keys at patches u' with |u - u'|_inf <= radius in every
    frame, and the first `sinks` tokens."""
    SparsePattern(temporal_radius=radius, sinks=sinks, window=0).check_layout(layout)
    _, pos = _positions(layout, device)
    return _with_sinks(_chebyshev(pos) <= radius, sinks)


def head_masks(
    layout: TokenLayout,
    pattern: SparsePattern,
    head_types: torch.Tensor,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """(H, N, N) bool: the spatial mask for heads typed 0 and the temporal mask for heads typed 1 (`head_types`:
    (H,) integers, `names.HEAD_TYPES` order)."""
    if head_types.dim() != 1 or not bool(((head_types == 0) | (head_types == 1)).all()):
        raise ValueError(f"head_types: expected (H,) of 0 (spatial) or 1 (temporal), got {head_types.tolist()}")
    sp = spatial_mask(layout, window=pattern.window, radius=pattern.spatial_radius, sinks=pattern.sinks,
                      device=device)  # fmt: skip
    tp = temporal_mask(layout, radius=pattern.temporal_radius, sinks=pattern.sinks, device=device)
    return torch.where(head_types.to(sp.device)[:, None, None] == 1, tp, sp)


def mask_density(mask: torch.Tensor) -> float:
    """The kept fraction of a bool mask (1 - sparsity)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask: expected a bool tensor, got {mask.dtype}")
    return float(mask.float().mean())


def pattern_for_sparsity(
    layout: TokenLayout, head_type: str, sparsity: float, *, sinks: int = 0, max_window: int = 1
) -> SparsePattern:
    """The pattern whose mask for `head_type` ("spatial": a window up to `max_window` frames and an in-frame radius;
    "temporal": a radius) has the realised sparsity nearest `sparsity` in (0, 1) on `layout` (ties: the denser)."""
    if not 0 < sparsity < 1:
        raise ValueError(f"sparsity: expected a fraction in (0, 1), got {sparsity!r}")
    side = max(layout.height, layout.width)
    if head_type == "spatial":
        candidates = [SparsePattern(window=w, spatial_radius=r, sinks=sinks)
                      for w in range(min(max_window, layout.frames - 1) + 1) for r in range(-1, side)]  # fmt: skip
        density = [mask_density(spatial_mask(layout, window=c.window, radius=c.spatial_radius, sinks=sinks))
                   for c in candidates]  # fmt: skip
    elif head_type == "temporal":
        candidates = [SparsePattern(temporal_radius=r, sinks=sinks, window=0) for r in range(side)]
        density = [mask_density(temporal_mask(layout, radius=c.temporal_radius, sinks=sinks)) for c in candidates]
    else:
        raise ValueError(f"head_type: expected 'spatial' or 'temporal', got {head_type!r}")
    best = min(range(len(candidates)), key=lambda i: (abs(1 - density[i] - sparsity), -density[i]))
    return candidates[best]
