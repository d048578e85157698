"""Single-device attention references: dense softmax attention (the quality reference) and masked sparse attention
with a spatial or temporal mask per head (SVG-style; the exactness reference of DSA), on full sequences."""

from __future__ import annotations

import torch

from flowlab.core.nets import TokenLayout, partial_attention
from flowlab.vision_gen.dsa.masks import SparsePattern, head_masks

__all__ = ["dense_attention", "sparse_attention"]


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Softmax attention of every token to every token: q, k, v: (B, H, S, D) -> (B, H, S, D)."""
    return partial_attention(q, k, v).out


def sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: TokenLayout,
    pattern: SparsePattern,
    head_types: torch.Tensor,
) -> torch.Tensor:
    """Masked attention, each head under the mask of its type: q, k, v: (B, H, S, D) with S = layout.num_tokens,
    head_types: (H,) 0 (spatial) / 1 (temporal) -> (B, H, S, D)."""
    if q.dim() != 4 or q.shape[2] != layout.num_tokens or q.shape[1] != head_types.shape[0]:
        raise ValueError(f"q: expected (B, {head_types.shape[0]}, {layout.num_tokens}, D), got {tuple(q.shape)}")
    return partial_attention(q, k, v, head_masks(layout, pattern, head_types, device=q.device)).out
