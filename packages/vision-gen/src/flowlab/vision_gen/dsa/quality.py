"""What sparsity costs on the tiny video DiT: its heads recorded at one time, profiled on the whole sequence and by
local matching on N shards with a majority vote (their agreement), each head type's attention error against dense
attention, and the end-to-end error of clips sampled with every block's heads masked by their voted types against
dense sampling from the same noise, at target sparsities."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from flowlab.core.nets import TokenLayout, VideoDiT, sdpa_attention
from flowlab.vision_gen.dsa.masks import SparsePattern, head_masks, mask_density, pattern_for_sparsity
from flowlab.vision_gen.dsa.model import MaskedAttention, RecordingAttention, sample_video, set_attention
from flowlab.vision_gen.dsa.profiling import classify_heads_local, majority_vote
from flowlab.vision_gen.dsa.reference import dense_attention, sparse_attention

__all__ = ["attention_errors", "capture_heads", "profile_blocks", "sample_errors", "sparsity_pattern"]


@torch.inference_mode()
def capture_heads(model: VideoDiT, x: torch.Tensor, t: float, *, generator: torch.Generator) -> list[tuple]:
    """Each block's (q, k, v), (B, H, N, D) each, when `model` denoises the clips x: (B, F, 1, S, S) noised to time
    `t` (rectified flow, noise drawn by `generator`); the blocks get dense attention back afterwards."""
    recorders = [RecordingAttention() for _ in model.blocks]
    set_attention(model, recorders)
    try:
        noise = torch.randn(x.shape, generator=generator).to(x)
        model(x=(1 - t) * noise + t * x, t=torch.full((x.shape[0],), t, device=x.device))
    finally:
        set_attention(model, [sdpa_attention] * len(model.blocks))
    return [r.calls[0] for r in recorders]


def profile_blocks(
    calls: list[tuple], layout: TokenLayout, pattern: SparsePattern, world_size: int, *, num_queries: int, seed: int
) -> dict[str, list]:
    """Per block: the head types voted by local matching on `world_size` shards of whole frames, the types from
    matching on the whole sequence, and their agreement (fraction of heads)."""
    if layout.frames % world_size:
        raise ValueError(f"world_size: expected a divisor of the {layout.frames} frames, got {world_size}")
    per, n = layout.frames // world_size, layout.num_tokens // world_size
    shard_layout = TokenLayout(per, layout.height, layout.width)
    voted, whole, agree = [], [], []
    for block, (q, k, v) in enumerate(calls):
        votes = []
        for r in range(world_size):
            rows = slice(r * n, (r + 1) * n)
            shard = pattern if r == 0 else replace(pattern, sinks=0)  # only rank 0 holds the sinks
            g = torch.Generator().manual_seed(seed * 1000 + block * 10 + r)
            votes.append(classify_heads_local(q[:, :, rows], k[:, :, rows], v[:, :, rows], shard_layout, shard,
                                              num_queries=num_queries, generator=g))  # fmt: skip
        types = majority_vote(torch.stack(votes))
        full = classify_heads_local(q, k, v, layout, pattern, num_queries=num_queries * world_size,
                                    generator=torch.Generator().manual_seed(seed * 1000 + block)).long()  # fmt: skip
        voted.append(types.tolist())
        whole.append(full.tolist())
        agree.append(float((types == full).double().mean()))
    return {"voted": voted, "whole": whole, "agreement": agree}


def sparsity_pattern(layout: TokenLayout, sparsity: float, *, sinks: int = 0) -> SparsePattern:
    """The spatial and temporal masks whose realised sparsities are nearest `sparsity` each."""
    sp = pattern_for_sparsity(layout, "spatial", sparsity, sinks=sinks)
    tp = pattern_for_sparsity(layout, "temporal", sparsity, sinks=sinks)
    return SparsePattern(window=sp.window, spatial_radius=sp.spatial_radius, temporal_radius=tp.temporal_radius,
                         sinks=sinks)  # fmt: skip


def attention_errors(
    calls: list[tuple], layout: TokenLayout, pattern: SparsePattern, types: list[list[int]]
) -> dict[str, float]:
    """Relative error ||sparse - dense|| / ||dense|| of the recorded heads under `pattern` with their voted `types`
    ("attn_err"), with every head spatial and with every head temporal, and each mask's realised sparsity."""
    heads = calls[0][0].shape[1]
    cases = {"attn_err": types, "attn_err_all_spatial": [[0] * heads] * len(calls),
             "attn_err_all_temporal": [[1] * heads] * len(calls)}  # fmt: skip
    row = {}
    for name, case in cases.items():
        num = den = 0.0
        for (q, k, v), block_types in zip(calls, case, strict=True):
            dense = dense_attention(q, k, v)
            num += float((sparse_attention(q, k, v, layout, pattern, torch.tensor(block_types)) - dense).square().sum())
            den += float(dense.square().sum())
        row[name] = math.sqrt(num / den)
    masks = head_masks(layout, pattern, torch.tensor([0, 1]))
    return row | {"sparsity_spatial": 1 - mask_density(masks[0]), "sparsity_temporal": 1 - mask_density(masks[1])}


def sample_errors(
    model: VideoDiT, noise: torch.Tensor, pattern: SparsePattern, types: list[list[int]], *, steps: int
) -> dict[str, float]:
    """Clips sampled from `noise` with every block's heads masked by their `types` under `pattern`, against dense
    sampling: PSNR (dB, data range 2) and relative L2 error, and the mean realised sparsity over the heads."""
    layout = TokenLayout(model.frames, model.grid, model.grid)
    dense = sample_video(model, noise, steps=steps)
    masks = [head_masks(layout, pattern, torch.tensor(t), device=noise.device) for t in types]
    set_attention(model, [MaskedAttention(m) for m in masks])
    try:
        sparse = sample_video(model, noise, steps=steps)
    finally:
        set_attention(model, [sdpa_attention] * len(model.blocks))
    mse = float((sparse - dense).square().mean())
    return {
        "psnr": 10 * math.log10(4.0 / mse) if mse > 0 else math.inf,
        "rel_err": float((sparse - dense).norm() / dense.norm()),
        "sparsity": 1 - sum(mask_density(m) for m in masks) / len(masks),
    }
