"""`TrainSettings`: the optimiser fields every training config shares, checked once. A method's config subclasses
it, adds its own fields and redeclares a field to change its default."""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowlab.core.config import Config

__all__ = ["TrainSettings"]


@dataclass(frozen=True)
class TrainSettings(Config):
    """`steps` optimiser steps of `batch_size` examples to a peak learning rate `lr`, weights averaged with
    `ema_decay` (0: the last weights), `seed` drawing the weights, batches and noise. Each bad value is a ValueError
    naming the field."""

    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-3
    ema_decay: float = 0.999
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {getattr(self, name)}")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"lr: expected a positive finite learning rate, got {self.lr}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: expected a value in [0, 1), got {self.ema_decay}")
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"seed: expected an integer in [0, 2**63), got {self.seed}")
