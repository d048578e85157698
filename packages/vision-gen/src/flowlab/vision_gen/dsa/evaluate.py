"""The distributed checks, run on real process groups (`spawn_gloo` on CPU, or inside `torchrun`): DSA against
single-device masked sparse attention for spatial, temporal and mixed heads, ring / Ulysses / USP against dense
attention, the bytes and messages each sends per layer beside their closed forms, and the planted-head vote."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from flowlab.core.config import Config
from flowlab.core.nets import TokenLayout
from flowlab.core.train import spawn_gloo
from flowlab.core.validation import check_choice
from flowlab.vision_gen.dsa.comm import CountingCommunicator
from flowlab.vision_gen.dsa.costs import LayerShape, comm_closed_form
from flowlab.vision_gen.dsa.dsa import DistributedSparseAttention, check_shardable
from flowlab.vision_gen.dsa.masks import SparsePattern
from flowlab.vision_gen.dsa.names import ALL_TO_ALL, SCHEDULES
from flowlab.vision_gen.dsa.profiling import planted_qkv, profile_heads
from flowlab.vision_gen.dsa.reference import dense_attention, sparse_attention
from flowlab.vision_gen.dsa.sequence_parallel import (
    ring_attention,
    ulysses_attention,
    usp_attention,
    usp_communicators,
)

__all__ = ["CheckConfig", "check_rank", "main", "run_check"]


@dataclass(frozen=True)
class CheckConfig(Config):
    """A check on `world_size` ranks: float64 q, k, v of `batch` clips of `frames` x `grid` x `grid` tokens, `heads`
    heads of `head_dim` under `pattern`; DSA with `schedule` and all-to-all `all_to_all`; USP's Ulysses degree
    `ulysses_degree` (used when it divides the world size and is below it); planted heads drawn from `seed`."""

    world_size: int = 4
    frames: int = 8
    grid: int = 4
    heads: int = 6
    head_dim: int = 8
    batch: int = 1
    pattern: SparsePattern = field(default_factory=SparsePattern)
    schedule: str = "dynamic"
    all_to_all: str = "native"
    ulysses_degree: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("frames", "grid", "heads", "head_dim", "batch", "ulysses_degree"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if self.world_size not in (1, 2, 4, 8):
            raise ValueError(f"world_size: expected 1, 2, 4 or 8 ranks, got {self.world_size!r}")
        check_choice(self.schedule, SCHEDULES, "schedule")
        check_choice(self.all_to_all, ALL_TO_ALL, "all_to_all")
        check_shardable(self.layout, self.pattern, self.world_size)

    @property
    def layout(self) -> TokenLayout:
        """frames x grid x grid tokens."""
        return TokenLayout(self.frames, self.grid, self.grid)

    def shape(self, spatial_heads: int) -> LayerShape:
        """The layer's closed-form shape with `spatial_heads` spatial heads (float64)."""
        return LayerShape(batch=self.batch, heads=self.heads, spatial_heads=spatial_heads,
                          tokens=self.layout.num_tokens, head_dim=self.head_dim, sinks=self.pattern.sinks,
                          elem_bytes=8, world_size=self.world_size,
                          reach=self.pattern.window * self.layout.tokens_per_frame,
                          ulysses_degree=self.ulysses_degree)  # fmt: skip


def _head_cases(heads: int) -> dict[str, torch.Tensor]:
    """Every head spatial, every head temporal, an alternating mix (spatial heads dominate the dynamic schedule or
    tie) and a mix with two temporal heads in three (temporal heads dominate); head types 0 / 1."""
    return {"spatial": torch.zeros(heads, dtype=torch.long), "temporal": torch.ones(heads, dtype=torch.long),
            "mixed": torch.arange(heads) % 2, "temporal_dominant": (torch.arange(heads) % 3 != 0).long()}  # fmt: skip


def _gather(comm: CountingCommunicator, local: torch.Tensor) -> torch.Tensor:
    """This rank's (B, H, n, D) -> every rank's, concatenated along the tokens (B, H, S, D)."""
    return torch.cat(comm.all_gather(local.contiguous()), dim=2)


def check_rank(rank: int, cfg: CheckConfig, device: str = "cpu") -> dict:
    """One rank's share of the check (the default process group must be up; tensors on `device`, a CUDA device
    under NCCL): the max |error| of each case, the counted bytes and messages of one layer of each method (summed
    over the ranks) and their closed forms, and the vote's head types for planted heads. Every rank returns the
    same dict."""
    torch.set_num_threads(1)
    world, layout = dist.get_world_size(), cfg.layout
    if world != cfg.world_size:
        raise ValueError(f"world_size: expected the group's {world} ranks, got {cfg.world_size}")
    comm = CountingCommunicator(all_to_all=cfg.all_to_all)
    n = layout.num_tokens // world
    rows = slice(rank * n, (rank + 1) * n)
    gen = torch.Generator().manual_seed(cfg.seed)
    planted = torch.randint(2, (cfg.heads,), generator=gen)
    q, k, v = (t.to(device) for t in planted_qkv(layout, planted, batch=cfg.batch, head_dim=cfg.head_dim,
                                                    generator=gen))  # fmt: skip
    local = [t[:, :, rows] for t in (q, k, v)]
    errors, counts = {}, {}

    def counted(name: str, fn, spatial: int) -> torch.Tensor:
        comm.reset()
        out = fn()
        mine = torch.tensor([comm.totals()["bytes"], comm.totals()["messages"]], device=device)
        total = torch.stack(comm.all_gather(mine)).sum(dim=0)
        counts[name] = {"bytes": int(total[0]), "messages": int(total[1]),
                        **{f"closed_{key}": value for key, value in
                           comm_closed_form(name.split("/")[0], cfg.shape(spatial)).items()}}  # fmt: skip
        return out

    attn = DistributedSparseAttention(layout, cfg.pattern, comm, schedule=cfg.schedule)
    for case, types in ((c, t.to(device)) for c, t in _head_cases(cfg.heads).items()):
        out = counted(f"dsa/{case}", lambda types=types: attn(*local, types), int((types == 0).sum()))
        ref = sparse_attention(q, k, v, layout, cfg.pattern, types)
        errors[f"dsa_{case}"] = float((_gather(comm, out) - ref).abs().max())
    dense = dense_attention(q, k, v)
    baselines = {"ring": lambda: ring_attention(*local, comm), "ulysses": lambda: ulysses_attention(*local, comm)}
    for name, fn in baselines.items():
        errors[name] = float((_gather(comm, counted(name, fn, 0)) - dense).abs().max())
    if 1 < cfg.ulysses_degree < world and world % cfg.ulysses_degree == 0:
        uly, ring = usp_communicators(cfg.ulysses_degree, counting=True, all_to_all=cfg.all_to_all)
        uly.reset(), ring.reset()
        out = usp_attention(*local, uly, ring)
        mine = torch.tensor([sum(c.totals()[key] for c in (uly, ring)) for key in ("bytes", "messages")],
                            device=device)  # fmt: skip
        total = torch.stack(comm.all_gather(mine)).sum(dim=0)
        closed = comm_closed_form("usp", cfg.shape(0))
        counts["usp"] = {"bytes": int(total[0]), "messages": int(total[1]),
                         **{f"closed_{key}": value for key, value in closed.items()}}  # fmt: skip
        errors["usp"] = float((_gather(comm, out) - dense).abs().max())
    vote = profile_heads(*local, layout, cfg.pattern, comm, generator=torch.Generator().manual_seed(cfg.seed + rank))
    return {"errors": errors, "counts": counts, "planted": planted.tolist(), "voted": vote.cpu().tolist()}


def run_check(cfg: CheckConfig, *, timeout: float = 120.0) -> dict:
    """`check_rank` on `cfg.world_size` local gloo processes; rank 0's result, with "agree" (every rank returned
    the same)."""
    results = spawn_gloo(check_rank, cfg.world_size, cfg, timeout=timeout)
    return {**results[0], "agree": all(r == results[0] for r in results)}


def main(argv: list[str] | None = None) -> None:
    """Under torchrun (NCCL on GPUs): `check_rank` with the `CheckConfig` given as JSON; rank 0 prints the result as
    one JSON line."""
    import argparse

    from flowlab.core.train import init_distributed

    parser = argparse.ArgumentParser(description="DSA exactness check under torchrun")
    parser.add_argument("--config", required=True, help="a CheckConfig as JSON")
    args = parser.parse_args(argv)
    info = init_distributed()
    cfg = CheckConfig.from_mapping(json.loads(args.config))
    result = check_rank(info.rank, cfg, str(info.device))
    if info.is_main:
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
