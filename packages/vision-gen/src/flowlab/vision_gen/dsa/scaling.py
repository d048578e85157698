"""Wall-clock of one attention layer for DSA (naive and dynamic schedules) and its dense baselines on the running
process group, and the `torchrun` entry point of the GPU scaling scenario:

    torchrun --nproc-per-node 4 -m flowlab.vision_gen.dsa.scaling --out times.json --frames 16 --grid 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from flowlab.core.nets import TokenLayout
from flowlab.vision_gen.dsa.comm import Communicator
from flowlab.vision_gen.dsa.dsa import DistributedSparseAttention
from flowlab.vision_gen.dsa.masks import SparsePattern
from flowlab.vision_gen.dsa.sequence_parallel import ring_attention, ulysses_attention, usp_attention, usp_communicators

__all__ = ["main", "time_layer"]


def _median_seconds(fn: Callable[[], torch.Tensor], device: torch.device, repeats: int) -> float:
    """The median over `repeats` timed calls (after one warm-up), each between barriers (CUDA synchronised)."""
    times = []
    for i in range(repeats + 1):
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier()
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_layer(
    layout: TokenLayout,
    pattern: SparsePattern,
    *,
    heads: int,
    head_dim: int,
    spatial_heads: int,
    dtype: torch.dtype,
    device: torch.device,
    repeats: int = 5,
) -> dict[str, float]:
    """Median seconds of one layer (batch 1) per method on the default group: "dsa", "dsa_naive", "ring",
    "ulysses" and, on 4 or more ranks, "usp" (Ulysses degree 2)."""
    comm = Communicator()
    world, rank = comm.world_size, comm.rank
    n = layout.num_tokens // world
    g = torch.Generator().manual_seed(rank)
    q, k, v = (torch.randn(1, heads, n, head_dim, generator=g).to(device, dtype) for _ in range(3))
    types = (torch.arange(heads) >= spatial_heads).long()
    times = {}
    for schedule in ("dynamic", "naive"):
        attn = DistributedSparseAttention(layout, pattern, comm, schedule=schedule)
        times["dsa" if schedule == "dynamic" else "dsa_naive"] = _median_seconds(lambda a=attn: a(q, k, v, types),
                                                                                 device, repeats)  # fmt: skip
    times["ring"] = _median_seconds(lambda: ring_attention(q, k, v, comm), device, repeats)
    times["ulysses"] = _median_seconds(lambda: ulysses_attention(q, k, v, comm), device, repeats)
    if world >= 4 and world % 2 == 0:
        uly, ring = usp_communicators(2)
        times["usp"] = _median_seconds(lambda: usp_attention(q, k, v, uly, ring), device, repeats)
    return times


def main(argv: list[str] | None = None) -> None:
    """Under torchrun: time every method (NCCL on GPUs, gloo otherwise) and write rank 0's times as JSON."""
    from flowlab.core.train import init_distributed

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--grid", type=int, default=16)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--spatial-heads", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    info = init_distributed()
    dtype = torch.bfloat16 if info.device.type == "cuda" else torch.float32
    layout = TokenLayout(args.frames, args.grid, args.grid)
    times = time_layer(layout, SparsePattern(window=1, sinks=args.grid * args.grid), heads=args.heads,
                       head_dim=args.head_dim, spatial_heads=args.spatial_heads, dtype=dtype, device=info.device,
                       repeats=args.repeats)  # fmt: skip
    if info.is_main:
        args.out.write_text(json.dumps({"world_size": info.world_size, "device": str(info.device), **times}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
