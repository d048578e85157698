"""Protocols and enums shared by every FlowLab model: what a model is called with and what it predicts."""

from __future__ import annotations

import enum
from typing import Any, Protocol, runtime_checkable

import torch


class Prediction(enum.Enum):
    """What a network's output means; `AffinePath.convert` translates between them."""

    VELOCITY = "velocity"
    EPSILON = "epsilon"  # the source sample x_0
    DATA = "data"  # the data sample x_1
    SCORE = "score"  # grad_x log p_t(x)

    @classmethod
    def parse(cls, value: Prediction | str) -> Prediction:
        """A `Prediction` or its value (case-insensitive string) -> the `Prediction`; `ValueError` for unknown names."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(p.value for p in cls)
            raise ValueError(f"prediction: unknown prediction {value!r}; expected one of {names}") from None


@runtime_checkable
class VectorField(Protocol):
    """A time-dependent field called with keywords: `field(x=x, t=t, **cond) -> (B, ...)`, `x: (B, ...)`, `t: (B,)`."""

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x: (B, ...), t: (B,) -> the field at (x, t): (B, ...)."""
        ...


@runtime_checkable
class FlowMap(Protocol):
    """A two-time map `X(x=x_s, s=s, t=t, **cond) -> x_t`, transporting `x: (B, ...)` from `s: (B,)` to `t: (B,)`."""

    def __call__(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x: (B, ...) at times s: (B,) -> the points transported to times t: (B, ...)."""
        ...


@runtime_checkable
class PosteriorModel(Protocol):
    """A discrete model `posterior(x=x_t, t=t) -> logits (B, L, V)` of p(x_1 | x_t) over a vocabulary of V tokens."""

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """x: (B, L) tokens, t: (B,) -> logits of p(x_1 | x_t): (B, L, V)."""
        ...
