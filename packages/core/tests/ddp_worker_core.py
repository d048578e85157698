"""Worker for test_core_train.py's DDP check (not a test module).

Run with `python -m torch.distributed.run --nproc-per-node 2 ddp_worker_core.py OUT_DIR` (Gloo on CPU), or load it
and call `train(out_dir)` in one process for the reference run. Each process trains the same float64 linear model for
two steps on its share of a fixed global batch of 16 (two micro-batches per rank) and saves what it ended with to
OUT_DIR/rank<r>.pt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from flowlab.core.train import EMA, fit, init_distributed, rank_generator, shard_batch

GLOBAL_BATCH = 16
STEPS = 2


def _global_batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)  # the same on every rank: a function of the step only
    x = torch.randn(GLOBAL_BATCH, 3, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([[1.0, -2.0], [0.5, 0.0], [3.0, 1.0]], dtype=torch.float64) + 0.1 * torch.randn(
        GLOBAL_BATCH, 2, generator=g, dtype=torch.float64
    )
    return x, y


def _loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], generator: torch.Generator):
    x, y = batch
    err = model(x) - y
    return err.pow(2).mean(), {"abs_err": err.abs().mean()}


def train(out_dir: str | Path) -> dict:
    info = init_distributed(device="cpu")
    torch.manual_seed(0)
    model = nn.Linear(3, 2, dtype=torch.float64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ema = EMA(model, half_life_samples=32.0)
    result = fit(
        model,
        _loss,
        lambda step, g: shard_batch(_global_batch(step)),
        steps=STEPS,
        optimizer=optimizer,
        ema=ema,
        grad_clip=2.0,
        accumulate=2,
        ckpt_dir=Path(out_dir) / "ckpt",
        ckpt_every=1,
        device="cpu",
        generator=rank_generator(7),
        log_every=1,
        progress=False,
    )
    out = {
        "rank": info.rank,
        "world_size": info.world_size,
        "is_main": info.is_main,
        "params": {k: v.detach().clone() for k, v in model.named_parameters()},
        "grads": {k: v.grad.detach().clone() for k, v in model.named_parameters()},
        "ema": {k: v.clone() for k, v in ema.shadow.items()},
        "loss": torch.tensor([row["loss"] for row in result.history], dtype=torch.float64),
        "abs_err": torch.tensor([row["abs_err"] for row in result.history], dtype=torch.float64),
        "samples_seen": result.samples_seen,
    }
    torch.save(out, Path(out_dir) / f"rank{info.rank}.pt")
    return out


if __name__ == "__main__":
    train(sys.argv[1])
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
