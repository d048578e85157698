"""Generic pieces of actor-critic networks: a Polyak-averaged target copy, aggregation over a critic ensemble, and a
block in which a module's parameters take no gradient."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["TargetNetwork", "aggregate", "frozen"]


def aggregate(values: torch.Tensor, how: str) -> torch.Tensor:
    """Aggregate over the leading critic axis: values (K, ...) -> (...) by "mean" or "min"."""
    if how == "mean":
        return values.mean(0)
    if how == "min":
        return values.min(0).values
    raise ValueError(f"how: expected 'mean' or 'min', got {how!r}")


class TargetNetwork(nn.Module):
    """A module with a frozen Polyak-averaged copy of `self.online` in `self.target`."""

    def __init__(self, online: nn.Module) -> None:
        super().__init__()
        self.online = online
        self.target = copy.deepcopy(online).requires_grad_(False)

    @torch.no_grad()
    def update_target(self, tau: float) -> None:
        """target <- (1 - tau) target + tau online."""
        torch._foreach_lerp_(list(self.target.parameters()), list(self.online.parameters()), tau)

    def pick(self, target: bool) -> nn.Module:
        """The target copy when `target` is true, else the online module."""
        return self.target if target else self.online


@contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """Parameters of `module` take no gradient inside the block (the graph still reaches its inputs)."""
    flags = [p.requires_grad for p in module.parameters()]
    module.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(module.parameters(), flags, strict=True):
            p.requires_grad_(flag)
