"""Closed-form costs of one attention layer over N ranks: the bytes and messages each distributed attention sends
(summed over the ranks), the attention FLOPs a mask keeps, and a two-stream cost model (compute at a measured
throughput, communication at a stated link bandwidth) for the timelines of DSA's schedules and its baselines."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from flowlab.core.nets import TokenLayout, partial_attention
from flowlab.vision_gen.dsa.dsa import sink_tokens
from flowlab.vision_gen.dsa.masks import SparsePattern, head_masks, mask_density
from flowlab.vision_gen.dsa.sequence_parallel import head_splits

__all__ = [
    "LayerShape",
    "attention_flops",
    "comm_closed_form",
    "layer_times",
    "model_layer",
    "modelled_times",
    "time_dense_attention",
]


@dataclass(frozen=True)
class LayerShape:
    """One attention layer: `batch`, `heads` (of which `spatial_heads` spatial under DSA), `tokens` S, `head_dim`
    D, `sinks` and `elem_bytes` of the dtype, over `world_size` ranks (USP: `ulysses_degree` x the rest); `reach`:
    the tokens of a neighbouring shard that the spatial window reaches (window x tokens per frame)."""

    batch: int
    heads: int
    spatial_heads: int
    tokens: int
    head_dim: int
    sinks: int
    elem_bytes: int
    world_size: int
    reach: int
    ulysses_degree: int = 2

    @property
    def shard(self) -> int:
        """n = S / N tokens per rank."""
        return self.tokens // self.world_size


def _ulysses(heads: int, shard: int, world: int, unit: int) -> tuple[int, int]:
    """Bytes and messages of Ulysses on `heads` heads: q, k, v packed in, the output back, one message per peer
    with a non-empty chunk; `unit` = B * D * elem bytes."""
    splits = head_splits(heads, world)
    nbytes = messages = 0
    for r in range(world):
        for j in range(world):
            if j != r:
                nbytes += (3 * splits[j] + splits[r]) * shard * unit
                messages += (splits[j] > 0) + (splits[r] > 0)
    return nbytes, messages


def _usp_parts(s: LayerShape) -> tuple[dict[str, int], dict[str, int]]:
    """USP's (all-to-all, ring) bytes and messages: Ulysses in each of the r groups of u ranks, then ring attention
    in each of the u groups of r ranks over u * n tokens of H / u heads."""
    u = s.ulysses_degree
    r = s.world_size // u
    unit = s.batch * s.head_dim * s.elem_bytes
    ub, um = _ulysses(s.heads, s.shard, u, unit)
    ring = {"bytes": u * r * (r - 1) * 2 * (s.heads // u) * (u * s.shard) * unit, "messages": u * r * (r - 1)}
    return {"bytes": r * ub, "messages": r * um}, ring


def _dsa_parts(s: LayerShape) -> tuple[dict[str, int], dict[str, int]]:
    """DSA's (partial ring with sinks, Ulysses of the temporal heads) bytes and messages: k and v of the `reach`
    boundary tokens both ways between neighbours, and rank 0's sinks to each rank that lacks them (to rank 1 in
    the same message as its boundary tokens)."""
    world, hsp = s.world_size, s.spatial_heads
    unit = s.batch * s.head_dim * s.elem_bytes
    reach = s.reach if world > 1 and hsp else 0
    sinks = [sink_tokens(r, s.shard, reach, s.sinks) for r in range(1, world)] if hsp else []
    neighbours = 2 * (world - 1) if reach else 0
    alone = sum(1 for r, c in enumerate(sinks, 1) if c and not (r == 1 and reach))  # sink-only messages
    ring = {"bytes": 2 * hsp * (neighbours * reach + sum(sinks)) * unit, "messages": neighbours + alone}
    tb, tm = _ulysses(s.heads - hsp, s.shard, world, unit)
    return ring, {"bytes": tb, "messages": tm}


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {key: a[key] + b[key] for key in a}


def comm_closed_form(method: str, s: LayerShape) -> dict[str, int]:
    """{"bytes", "messages"} that `method` ("ring", "ulysses", "usp", "dsa") sends in one layer, over all ranks."""
    n, world, unit = s.shard, s.world_size, s.batch * s.head_dim * s.elem_bytes
    if method == "ring":
        return {"bytes": world * (world - 1) * 2 * s.heads * n * unit, "messages": world * (world - 1)}
    if method == "ulysses":
        nbytes, messages = _ulysses(s.heads, n, world, unit)
        return {"bytes": nbytes, "messages": messages}
    if method == "usp":
        return _add(*_usp_parts(s))
    if method == "dsa":
        return _add(*_dsa_parts(s))
    raise ValueError(f"method: expected ring, ulysses, usp or dsa, got {method!r}")


def attention_flops(mask: torch.Tensor, *, batch: int, head_dim: int) -> float:
    """Multiply-add FLOPs of attention restricted to a bool `mask` ((H, S, S) or (S, S) per head):
    4 * D per kept query-key pair (scores and values), times the batch."""
    return 4.0 * head_dim * batch * float(mask.sum())


def _seconds(count: dict[str, int], world: int, bytes_per_second: float, latency: float) -> float:
    """Per-rank seconds of a closed-form count (summed over ranks) at the link bandwidth plus a per-message
    latency."""
    return (count["bytes"] / bytes_per_second + count["messages"] * latency) / world


def layer_times(
    s: LayerShape,
    *,
    dense_seconds: float,
    spatial_density: float,
    temporal_density: float,
    local_share: float,
    bytes_per_second: float,
    latency: float,
) -> dict[str, dict[str, float]]:
    """Per-rank seconds of each phase of one layer ("dense": one device doing all N ranks' work). Compute:
    `dense_seconds`, the measured time of one rank's dense attention (n queries over S keys, all heads), shared per
    head and scaled by the masks' densities for DSA (a block-sparse kernel's saving; `local_share` of the spatial
    pairs lie in the rank's own shard). Communication: the closed-form counts at `bytes_per_second` and `latency`
    per message."""
    world, per_head = s.world_size, dense_seconds / s.heads
    hsp, htp = s.spatial_heads, s.heads - s.spatial_heads
    usp_a2a, usp_ring = _usp_parts(s) if world % s.ulysses_degree == 0 else ({"bytes": 0, "messages": 0},) * 2
    dsa_ring, dsa_a2a = _dsa_parts(s)
    sp = per_head * hsp * spatial_density

    def sec(count: dict[str, int]) -> float:
        return _seconds(count, world, bytes_per_second, latency)

    return {
        "dense": {"compute": dense_seconds * world},
        "ring": {"compute": dense_seconds, "comm": sec(comm_closed_form("ring", s))},
        "ulysses": {"compute": dense_seconds, "comm": sec(comm_closed_form("ulysses", s))},
        "usp": {"compute": dense_seconds, "a2a": sec(usp_a2a), "ring": sec(usp_ring)},
        "dsa": {"local": sp * local_share, "neighbours": sp * (1 - local_share),
                "temporal": per_head * htp * temporal_density, "ring": sec(dsa_ring), "a2a": sec(dsa_a2a) / 2},
    }  # fmt: skip


def modelled_times(phases: dict[str, dict[str, float]]) -> dict[str, float]:
    """Seconds per layer of each method from `layer_times`: dense and Ulysses run their phases in turn; ring and
    USP's ring hide the transfers behind the blocks (max); DSA naive runs everything in turn, DSA dynamic overlaps
    the first all-to-all with the local block, the partial ring with the temporal attention and the second
    all-to-all with the neighbour blocks."""
    d = phases["dsa"]
    return {
        "dense": phases["dense"]["compute"],
        "ring": max(phases["ring"]["compute"], phases["ring"]["comm"]),
        "ulysses": phases["ulysses"]["compute"] + phases["ulysses"]["comm"],
        "usp": phases["usp"]["a2a"] + max(phases["usp"]["compute"], phases["usp"]["ring"]),
        "dsa_naive": d["local"] + d["neighbours"] + d["temporal"] + d["ring"] + 2 * d["a2a"],
        "dsa": max(d["a2a"], d["local"]) + max(d["ring"], d["temporal"]) + max(d["a2a"], d["neighbours"]),
    }


def time_dense_attention(s: LayerShape, *, repeats: int = 9, generator: torch.Generator) -> float:
    """Measured seconds of one rank's dense attention in float32 on this process (n = S / N queries over S keys,
    all heads; the median of `repeats` after a warm-up)."""
    q = torch.randn(s.batch, s.heads, s.shard, s.head_dim, generator=generator)
    k, v = (torch.randn(s.batch, s.heads, s.tokens, s.head_dim, generator=generator) for _ in range(2))
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        partial_attention(q, k, v)
        if i:
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _local_share(mask: torch.Tensor, world: int) -> float:
    """The fraction of a spatial mask's kept pairs whose key lies in the query's own shard."""
    n = mask.shape[0] // world
    own = sum(int(mask[r * n : (r + 1) * n, r * n : (r + 1) * n].sum()) for r in range(world))
    return own / int(mask.sum())


def model_layer(
    s: LayerShape,
    layout: TokenLayout,
    pattern: SparsePattern,
    *,
    dense_seconds: float,
    bandwidth_mb_s: float,
    latency_us: float,
) -> dict[str, float]:
    """Modelled seconds of one layer per method (`modelled_times`) from a measured per-rank dense attention time
    (`time_dense_attention`), the densities of `pattern`'s masks on `layout`, and the closed-form counts (which
    the counted ones match) at `bandwidth_mb_s` MB/s and `latency_us` per message."""
    masks = head_masks(layout, pattern, torch.tensor([0, 1]))
    phases = layer_times(s, dense_seconds=dense_seconds,
                         spatial_density=mask_density(masks[0]), temporal_density=mask_density(masks[1]),
                         local_share=_local_share(masks[0], s.world_size), bytes_per_second=bandwidth_mb_s * 1e6,
                         latency=latency_us * 1e-6)  # fmt: skip
    return modelled_times(phases)
