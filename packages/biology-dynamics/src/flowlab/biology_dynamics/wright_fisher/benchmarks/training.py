"""The training run every method of the Wright-Fisher scenarios shares: the core `fit` with Adam, no progress bar,
the training NaN rate read off the logged history and the wall time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.bench import BenchContext
from flowlab.core.train import fit

__all__ = ["train_method"]


def train_method(
    ctx: BenchContext, net: torch.nn.Module, loss_fn: Callable, data: Callable[[int, torch.Generator], Any], *,
    steps: int, lr: float,
) -> tuple[float, float]:  # fmt: skip
    """Train `net` on `data(step, generator)` batches for `steps` Adam steps at `lr` -> (mean logged `nan_rate`,
    seconds)."""
    start = time.perf_counter()
    result = fit(net, loss_fn, data, steps=steps, optimizer=torch.optim.Adam(net.parameters(), lr),
                 device=ctx.device, generator=ctx.generator, log_every=min(100, steps), progress=False)  # fmt: skip
    rates = [h["nan_rate"] for h in result.history if "nan_rate" in h]
    return (sum(rates) / len(rates) if rates else 0.0), time.perf_counter() - start
