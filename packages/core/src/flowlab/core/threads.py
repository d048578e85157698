"""The intra-op thread count of torch, set for a block: what the runner's workers, the scenarios' worker pools and
the artifact builds use to pin it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["torch_threads"]


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with `n` intra-op torch threads (None: unchanged) and restore the setting afterwards.

    Small networks on a shared CPU train fastest, and are disturbed least by other load, on one thread."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
