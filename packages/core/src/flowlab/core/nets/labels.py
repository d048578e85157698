"""Class labels of conditional networks: their check and classifier-free-guidance label dropout.

The null label, the "no class" of classifier-free guidance, is the index `num_classes` (one past the last class).
"""

from __future__ import annotations

import torch

__all__ = ["check_labels", "drop_labels"]


def check_labels(y: object, batch: int, num_classes: int, *, allow_null: bool = False) -> torch.Tensor:
    """y: (batch,) int64 class labels in [0, num_classes), or also == num_classes (the null label) if `allow_null`;
    returns y, or raises a ValueError naming `y`."""
    top = num_classes if allow_null else num_classes - 1
    if not isinstance(y, torch.Tensor) or y.dtype != torch.long or tuple(y.shape) != (batch,):
        got = f"{y.dtype} {tuple(y.shape)}" if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"y: expected int64 class labels of shape ({batch},), got {got}")
    if y.numel() and bool(((y < 0) | (y > top)).any()):
        raise ValueError(f"y: expected labels in [0, {top}], got values in [{int(y.min())}, {int(y.max())}]")
    return y


def drop_labels(y: torch.Tensor, p: float, *, null_label: int, generator: torch.Generator) -> torch.Tensor:
    """y: (B,) int64 -> (B,): each label independently replaced by `null_label` with probability `p`, the draws taken
    from `generator` (on its own device), so a seeded run drops the same labels."""
    if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
        raise ValueError(f"p: expected a probability in [0, 1], got {p!r}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    drop = torch.rand(y.shape, generator=generator, device=generator.device).to(y.device) < p
    return torch.where(drop, torch.full_like(y, null_label), y)
