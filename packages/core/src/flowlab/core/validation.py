"""Argument checks used at public entry points; every error names the offending argument."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


def check_tensor(x: torch.Tensor, name: str, *, min_dim: int = 1, finite: bool = True) -> torch.Tensor:
    """Return `x` after checking it is a tensor with at least `min_dim` dims and (optionally) only finite values."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(f"{name}: expected at least {min_dim} dimension(s) (batch first), got shape {tuple(x.shape)}")
    if finite and x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: contains NaN or inf values")
    return x


def check_same_batch(**tensors: torch.Tensor) -> int:
    """Check that every named tensor has the same leading (batch) size and return it."""
    sizes = {name: int(t.shape[0]) for name, t in tensors.items()}
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"{n}={s}" for n, s in sizes.items())
        raise ValueError(f"mismatched batch sizes: {shown}")
    return next(iter(sizes.values()))


def check_time(t: torch.Tensor, batch: int, name: str = "t", *, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    """Check `t: (B,)` has one finite entry per sample and lies in [low, high]."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor of shape ({batch},), got {type(t).__name__}")
    if t.dim() != 1 or t.shape[0] != batch:
        raise ValueError(f"{name}: expected shape ({batch},) (one time per sample), got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: contains NaN or inf values")
    if bool((t < low).any()) or bool((t > high).any()):
        raise ValueError(
            f"{name}: times must lie in [{low}, {high}], got range [{float(t.min()):.4g}, {float(t.max()):.4g}]"
        )
    return t


def check_grid(grid: torch.Tensor, name: str = "grid") -> torch.Tensor:
    """Check a 1-D strictly monotone time grid in [0, 1] with at least two points."""
    if not isinstance(grid, torch.Tensor) or grid.dim() != 1 or grid.numel() < 2:
        shape = tuple(grid.shape) if isinstance(grid, torch.Tensor) else type(grid).__name__
        raise ValueError(f"{name}: expected a 1-D tensor of at least 2 times, got {shape}")
    if not bool(torch.isfinite(grid).all()):
        raise ValueError(f"{name}: contains NaN or inf values")
    if bool((grid < 0).any()) or bool((grid > 1).any()):
        raise ValueError(f"{name}: times must lie in [0, 1]")
    steps = grid[1:] - grid[:-1]
    if not (bool((steps > 0).all()) or bool((steps < 0).all())):
        raise ValueError(f"{name}: must be strictly increasing or strictly decreasing")
    return grid


def check_positive(value: float, name: str) -> float:
    """`value` as a float when it is a finite number above 0, else a ValueError naming `name`."""
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a positive finite number, got {value!r}")
    return float(value)


def check_choice(value: str, choices: Iterable[str], name: str) -> str:
    """Check `value` is one of `choices`."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {', '.join(map(repr, choices))}")
    return value


def check_device(device: object, name: str = "device") -> torch.device:
    """`device` as a torch.device of a kind that is present here (cpu, or cuda when CUDA is available)."""
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"{name}: expected cpu, cuda or cuda:N, got {device!r}") from err
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"{name}: expected cpu, cuda or cuda:N, got {device!r}")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}: {device!r} asked for, but no CUDA device is available")
    return resolved


def expand_like(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape `t: (B,)` to `(B, 1, ..., 1)` so it broadcasts against `x: (B, ...)`."""
    return t.reshape(t.shape[0], *([1] * (x.dim() - 1)))
