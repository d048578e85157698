"""Named results shared by every solver, and the one fixed-grid loop they all run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["StepInfo", "Trajectory", "batched_times", "check_callback", "run_grid"]


@dataclass(frozen=True)
class Trajectory:
    """The states a solver visited.

    times: (N + 1,) the grid (for `edm_sample`, the noise levels sigma) on the states' device and dtype;
    states: (N + 1, B, ...) with states[0] the initial state and states[-1] the result (a `JVPState` of
    stacked tensors for `jvp_euler`).
    """

    times: torch.Tensor
    states: Any

    @property
    def final(self) -> Any:
        """The last state, the value the solver returns without `return_trajectory`."""
        if isinstance(self.states, torch.Tensor):
            return self.states[-1]
        return type(self.states)(*(s[-1] for s in _fields(self.states)))


@dataclass(frozen=True)
class StepInfo:
    """What a `callback` receives after each step: the step index, its times `t, t_next: (B,)` and the new state."""

    step: int
    t: torch.Tensor
    t_next: torch.Tensor
    x: Any


def _fields(state: Any) -> tuple[torch.Tensor, ...]:
    return tuple(getattr(state, name) for name in state.__dataclass_fields__)


def _stack(states: list) -> Any:
    if isinstance(states[0], torch.Tensor):
        return torch.stack(states)
    return type(states[0])(*(torch.stack(parts) for parts in zip(*(_fields(s) for s in states))))


def batched_times(grid: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The grid as one `(B,)` tensor per point, on `like`'s device and dtype, made once before the loop."""
    times = grid.to(device=like.device, dtype=like.dtype)
    return times[:, None].repeat(1, like.shape[0]).unbind(0)


def run_grid(
    step: Callable[[int, Any, torch.Tensor, torch.Tensor], Any],
    x: Any,
    times: tuple[torch.Tensor, ...],
    grid: torch.Tensor,
    *,
    return_trajectory: bool,
    callback: Callable[[StepInfo], Any] | None,
) -> Any:
    """x <- step(i, x, t_i, t_{i+1}) over the precomputed `(B,)` times; nothing else happens inside the loop."""
    states = [x] if return_trajectory else None
    for i in range(len(times) - 1):
        x = step(i, x, times[i], times[i + 1])
        if states is not None:
            states.append(x)
        if callback is not None:
            callback(StepInfo(i, times[i], times[i + 1], x))
    if states is None:
        return x
    return Trajectory(times=grid.to(device=times[0].device, dtype=times[0].dtype), states=_stack(states))


def check_callback(callback: Any) -> None:
    """A ValueError unless `callback` is None or a callable (it is given a `StepInfo` after each step)."""
    if callback is not None and not callable(callback):
        raise ValueError(f"callback: expected a callable taking a StepInfo, got {type(callback).__name__}")
