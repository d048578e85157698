"""Exponential moving average of a model's weights, with the decay given per update or as a half-life in
samples."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from flowlab.core.train.distributed import unwrap_model

__all__ = ["EMA"]


class EMA:
    """Average `w_ema <- d * w_ema + (1 - d) * w` of a model's floating-point parameters (buffers copied).

    Give exactly one of `decay` (a fixed d per update, in [0, 1)) or `half_life_samples` (EDM2-style: with a
    batch of b samples, d = 0.5 ** (b / half_life_samples), so after `half_life_samples` samples the average
    has moved half-way to a constant target whatever the batch size). For the first `warmup_steps` updates the
    average tracks the weights exactly, so it does not drag in the random initialisation.

    Under DDP build it on the plain model (a wrapped one is unwrapped); every rank keeps the same average.
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        decay: float | None = None,
        half_life_samples: float | None = None,
        warmup_steps: int = 0,
    ) -> None:
        if (decay is None) == (half_life_samples is None):
            raise ValueError("decay, half_life_samples: give exactly one of them")
        if decay is not None and not (0.0 <= decay < 1.0):
            raise ValueError(f"decay: expected a value in [0, 1), got {decay}")
        if half_life_samples is not None and not (half_life_samples > 0 and math.isfinite(half_life_samples)):
            raise ValueError(f"half_life_samples: expected a positive finite number, got {half_life_samples}")
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps: expected a non-negative int, got {warmup_steps!r}")
        self.model = unwrap_model(model)
        self.decay = None if decay is None else float(decay)
        self.half_life_samples = None if half_life_samples is None else float(half_life_samples)
        self.warmup_steps = warmup_steps
        self.num_updates = 0
        params, buffers = self._tensors()
        self.shadow: dict[str, torch.Tensor] = {name: t.detach().clone() for name, t in {**params, **buffers}.items()}

    def _tensors(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        # Looked up on every use: `Module.to` replaces buffer tensors, so cached references would go stale.
        params = {n: p for n, p in self.model.named_parameters() if p.is_floating_point() or p.is_complex()}
        return params, dict(self.model.named_buffers())

    def decay_for(self, batch_size: int | None = None) -> float:
        """The decay d applied by the next `update(batch_size)` (0 during warm-up)."""
        if self.num_updates < self.warmup_steps:
            return 0.0
        if self.decay is not None:
            return self.decay
        if batch_size is None or batch_size <= 0:
            raise ValueError(
                f"batch_size: an EMA with half_life_samples needs the positive batch size, got {batch_size}"
            )
        return 0.5 ** (batch_size / self.half_life_samples)

    @torch.no_grad()
    def update(self, batch_size: int | None = None) -> None:
        """Fold the model's current weights into the average; `batch_size` is the (global) batch of the last
        step."""
        d = self.decay_for(batch_size)
        params, buffers = self._tensors()
        names = list(params)
        if names:
            torch._foreach_lerp_([self.shadow[n] for n in names], [params[n].detach() for n in names], 1.0 - d)
        for name, b in buffers.items():
            self.shadow[name].copy_(b)
        self.num_updates += 1

    @contextmanager
    def swap(self) -> Iterator[nn.Module]:
        """Put the averaged weights into the model for the body of the `with` (evaluation), then restore."""
        params, buffers = self._tensors()
        targets = {**params, **buffers}
        with torch.no_grad():
            saved = {name: t.detach().clone() for name, t in targets.items()}
            for name, t in targets.items():
                t.copy_(self.shadow[name])
        try:
            yield self.model
        finally:
            with torch.no_grad():
                for name, t in targets.items():
                    t.copy_(saved[name])

    @torch.no_grad()
    def copy_to_model(self) -> nn.Module:
        """Put the averaged weights into the model for good (the end of training) and return the model."""
        params, buffers = self._tensors()
        for name, t in {**params, **buffers}.items():
            t.copy_(self.shadow[name])
        return self.model

    def to(self, device: torch.device | str) -> EMA:
        """Move the averaged weights to `device` (the model is moved by its owner)."""
        self.shadow = {name: t.to(device) for name, t in self.shadow.items()}
        return self

    def state_dict(self) -> dict[str, Any]:
        """Tensors and numbers only (safe for `torch.load(..., weights_only=True)`)."""
        return {"shadow": dict(self.shadow), "num_updates": self.num_updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the average saved by `state_dict`; names and shapes must match this model."""
        if not isinstance(state, Mapping) or "shadow" not in state or "num_updates" not in state:
            raise ValueError("state: expected a mapping with 'shadow' and 'num_updates' (from EMA.state_dict)")
        shadow = state["shadow"]
        if set(shadow) != set(self.shadow):
            missing, extra = set(self.shadow) - set(shadow), set(shadow) - set(self.shadow)
            raise ValueError(
                f"state: EMA tensors do not match the model (missing {sorted(missing)}, extra {sorted(extra)})"
            )
        with torch.no_grad():
            for name, t in self.shadow.items():
                if shadow[name].shape != t.shape:
                    raise ValueError(
                        f"state: EMA tensor {name!r} has shape {tuple(shadow[name].shape)}, expected {tuple(t.shape)}"
                    )
                t.copy_(shadow[name])
        self.num_updates = int(state["num_updates"])
