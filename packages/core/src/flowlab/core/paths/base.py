"""Named results of probability paths."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PathSample:
    """A draw from a conditional path: x_t on the segment from x_0 (source) to x_1 (data) and its target velocity.

    x_0, x_1, x_t, dx_t: (B, ...); t: (B,)
    """

    x_0: torch.Tensor
    x_1: torch.Tensor
    t: torch.Tensor
    x_t: torch.Tensor
    dx_t: torch.Tensor


@dataclass(frozen=True)
class DiscretePathSample:
    """A draw from a discrete path: token sequences x_0, x_1, x_t: (B, L) (long) at times t: (B,)."""

    x_0: torch.Tensor
    x_1: torch.Tensor
    t: torch.Tensor
    x_t: torch.Tensor
