"""Head profiling with local matching and a global vote: each rank compares, for a sample of its queries, the
attention over its own keys with the spatially and the temporally masked attention (SVG's criterion) and votes per
head; the votes are all-gathered and the majority types every head the same way on every rank. Planted heads
(random q, k, v whose heads are built spatial or temporal) test the vote."""

from __future__ import annotations

import warnings
from dataclasses import replace

import torch

from flowlab.core.nets import TokenLayout, partial_attention
from flowlab.vision_gen.dsa.comm import Communicator
from flowlab.vision_gen.dsa.masks import SparsePattern, spatial_mask, temporal_mask

__all__ = ["classify_heads_local", "majority_vote", "planted_qkv", "profile_heads"]


def classify_heads_local(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: TokenLayout,
    pattern: SparsePattern,
    *,
    num_queries: int = 64,
    generator: torch.Generator,
) -> torch.Tensor:
    """(H,) int8 votes, 0 = spatial, 1 = temporal, for tokens q, k, v: (B, H, N, D) laid out as `layout` (a shard of
    whole frames, or the whole sequence): for `num_queries` queries drawn by `generator`, the squared error of the
    frame-local attention (window 0, the pattern's in-frame radius) and of the temporally masked attention against
    full attention over these keys; the smaller wins (ties: spatial). The window is left out on purpose: a shard of
    two frames under window 1 would be dense and always win. Sinks count as far as this shard holds them."""
    if q.dim() != 4 or q.shape[2] != layout.num_tokens:
        raise ValueError(f"q: expected (B, H, {layout.num_tokens}, D) for the layout, got {tuple(q.shape)}")
    if isinstance(num_queries, bool) or not isinstance(num_queries, int) or num_queries < 1:
        raise ValueError(f"num_queries: expected an integer >= 1, got {num_queries!r}")
    rows = torch.randperm(layout.num_tokens, generator=generator)[:num_queries].to(q.device)
    sinks = min(pattern.sinks, layout.num_tokens)
    masks = {
        "spatial": spatial_mask(layout, window=0, radius=pattern.spatial_radius, sinks=sinks, device=q.device),
        "temporal": temporal_mask(layout, radius=pattern.temporal_radius, sinks=sinks, device=q.device),
    }
    qs = q[:, :, rows]
    full = partial_attention(qs, k, v).out
    err = {name: (partial_attention(qs, k, v, m[rows]).out - full).square().sum(dim=(0, 2, 3))
           for name, m in masks.items()}  # fmt: skip
    return (err["temporal"] < err["spatial"]).to(torch.int8)


def majority_vote(votes: torch.Tensor) -> torch.Tensor:
    """(R, H) votes of R ranks (0 spatial, 1 temporal) -> (H,) int64 head types: temporal where more than half
    the ranks voted temporal (ties: spatial)."""
    if votes.dim() != 2:
        raise ValueError(f"votes: expected (ranks, heads), got shape {tuple(votes.shape)}")
    return (2 * votes.long().sum(dim=0) > votes.shape[0]).long()


def profile_heads(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: TokenLayout,
    pattern: SparsePattern,
    comm: Communicator,
    *,
    num_queries: int = 64,
    generator: torch.Generator,
) -> torch.Tensor:
    """(H,) head types, identical on every rank: this rank's votes over its shard q, k, v: (B, H, n, D) of whole
    frames (`layout`: the full sequence's), all-gathered and decided by `majority_vote`. Warns when a shard holds a
    single frame (local matching cannot see temporal structure)."""
    per_rank = layout.frames // comm.world_size
    if per_rank < 2:
        warnings.warn(f"profile_heads: {per_rank} frame per rank; local matching cannot see temporal patterns",
                      stacklevel=2)  # fmt: skip
    local = TokenLayout(per_rank, layout.height, layout.width)
    shard_pattern = pattern if comm.rank == 0 else replace(pattern, sinks=0)  # only rank 0 holds the sinks
    votes = classify_heads_local(q, k, v, local, shard_pattern, num_queries=num_queries, generator=generator)
    return majority_vote(torch.stack(comm.all_gather(votes.to(torch.int64))))


def planted_qkv(
    layout: TokenLayout,
    head_types: torch.Tensor,
    *,
    batch: int = 1,
    head_dim: int = 16,
    strength: float = 4.0,
    dtype: torch.dtype = torch.float64,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v: (batch, H, N, head_dim) with planted head types (head_types: (H,) 0/1): a spatial head's queries
    and keys carry a random code of their frame, a temporal head's a code of their patch position, scaled by
    `strength` over unit noise, so attention concentrates within frames or along time; values are noise."""
    h, n = head_types.shape[0], layout.num_tokens
    frame = torch.arange(n) // layout.tokens_per_frame
    place = torch.arange(n) % layout.tokens_per_frame

    def codes(count: int) -> torch.Tensor:
        c = torch.randn(h, count, head_dim, generator=generator, dtype=dtype)
        return c / c.norm(dim=-1, keepdim=True) * strength * head_dim**0.25

    by_frame, by_place = codes(layout.frames)[:, frame], codes(layout.tokens_per_frame)[:, place]
    signal = torch.where(head_types[:, None, None].bool(), by_place, by_frame)  # (H, N, D)
    q, k, v = (torch.randn(batch, h, n, head_dim, generator=generator, dtype=dtype) for _ in range(3))
    return q + signal, k + signal, v
