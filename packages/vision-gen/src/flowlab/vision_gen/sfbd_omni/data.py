"""The digits restoration problem: a few clean images per class from the kit's train split, every other train image
seen only through a corruption, and the test split held out as the clean reference."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.vision_gen.kit.corruptions import Corruption
from flowlab.vision_gen.kit.data import load_digits_images

__all__ = ["RestorationData", "corrupted_digits"]


@dataclass(frozen=True)
class RestorationData:
    """clean: (n, 1, S, S) the clean few; y: (N, C_y, S, S) the observations; truth: (N, 1, S, S) the images behind
    them (for measuring only); fresh: (V, C_y, S, S) fresh observations of the validation split, never trained on;
    reference: (M, 1, S, S) the held-out clean split."""

    clean: torch.Tensor
    y: torch.Tensor
    truth: torch.Tensor
    fresh: torch.Tensor
    reference: torch.Tensor


def corrupted_digits(
    corruption: Corruption,
    *,
    clean_count: int = 50,
    size: int = 8,
    seed: int = 0,
    reference: str = "test",
    limit: int | None = None,
) -> RestorationData:
    """clean_count clean train images (as even over the 10 classes as the count allows, chosen by `seed`), the
    rest of the train split (its first `limit` images when given) and the validation split corrupted once with a
    generator seeded by `seed`, and the `reference` split."""
    if not (isinstance(clean_count, int) and 0 <= clean_count <= 500):
        raise ValueError(f"clean_count: expected an int in [0, 500], got {clean_count!r}")
    train = load_digits_images(size, split="train")
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(train), generator=g)
    ranks = torch.empty_like(order)
    labels = train.y[order]
    for c in range(10):  # position of each image within its class in the seeded order
        ranks[labels == c] = torch.arange(int((labels == c).sum()))
    keys = ranks * 10 + labels  # round-robin over the classes: all first images, then all second ones, ...
    chosen = order[torch.argsort(keys)[:clean_count]]
    rest = torch.ones(len(train), dtype=torch.bool)
    rest[chosen] = False
    if limit is not None and not (isinstance(limit, int) and limit >= 2):
        raise ValueError(f"limit: expected at least 2 observations or None, got {limit!r}")
    truth = train.x[rest][:limit]
    y = corruption.sample(truth, generator=g)
    fresh = corruption.sample(load_digits_images(size, split="val").x, generator=g)
    return RestorationData(train.x[chosen], y, truth, fresh, load_digits_images(size, split=reference).x)
