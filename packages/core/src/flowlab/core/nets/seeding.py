"""Network initialisation from a seed of its own, independent of what was drawn from torch's global RNG before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from flowlab.core.distributions import randint

__all__ = ["seeded_init"]


@contextmanager
def seeded_init(seed: int | torch.Generator) -> Iterator[None]:
    """Modules built inside the `with` take their initial weights from `seed` alone: torch's global CPU RNG is forked,
    seeded with `seed` (a generator gives one draw from itself), and restored on exit. Without it a model's
    initialisation depends on how many other models were built, or trained, earlier in the process."""
    if isinstance(seed, torch.Generator):
        seed = int(randint(2**31 - 1, (1,), generator=seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
