"""Timing helpers shared by the core's speed scenarios.

Candidates are timed round-robin (A, B, C, A, B, C, ...) and each keeps its fastest run, so that load from other
processes, which only ever adds time, affects every candidate alike instead of whichever ran during a spike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from flowlab.core.bench import Timer


def fastest_seconds(
    candidates: Mapping[str, Callable[[], object]], *, device: torch.device, repeats: int, warmup: int = 1
) -> dict[str, float]:
    """Best-of-`repeats` wall seconds of each candidate, timed interleaved after `warmup` untimed rounds."""
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(repeats):
        for name, fn in candidates.items():
            with Timer(device) as tm:
                fn()
            best[name] = min(best[name], tm.seconds)
    return best
