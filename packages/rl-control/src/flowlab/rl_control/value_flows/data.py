"""Offline datasets: flat transitions in episode order, stored as npz, validated on construction and load.

Fields (N transitions): observations (N, O), actions (N, A), rewards (N,), next_observations (N, O), terminations
(N,) bool, truncations (N,) bool, optionally next_actions (N, A) (the behaviour policy's next action, for policy
evaluation). Rewards are stored raw; `reward_scale` normalises them for training.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from flowlab.core.distributions import randint

__all__ = ["OfflineDataset", "load_dataset"]

_REQUIRED = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations")


@dataclass(frozen=True)
class OfflineDataset:
    """Transitions of an offline RL dataset (see the module docstring). Validated on construction: equal lengths,
    finite values, 2-D observations/actions and, with `action_bounds`, actions inside them."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_observations: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    next_actions: np.ndarray | None = None
    action_bounds: tuple[float, float] = (-1.0, 1.0)

    def __post_init__(self) -> None:
        n = None
        for f in fields(self):
            if f.name == "action_bounds":
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            arr = np.asarray(value)
            object.__setattr__(self, f.name, arr)
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(
                    f"{f.name}: expected {n} entries like observations, got {len(arr)} (mismatched lengths)"
                )
            if arr.dtype != bool and not np.all(np.isfinite(arr)):
                raise ValueError(f"{f.name}: contains NaN or inf values")
        if n == 0:
            raise ValueError("observations: the dataset is empty")
        for name in ("observations", "actions", "next_observations"):
            if getattr(self, name).ndim != 2:
                raise ValueError(f"{name}: expected a 2-D array (N, dim), got shape {getattr(self, name).shape}")
        if self.observations.shape != self.next_observations.shape:
            raise ValueError("next_observations: expected the shape of observations")
        for name in ("rewards", "terminations", "truncations"):
            if getattr(self, name).ndim != 1:
                raise ValueError(f"{name}: expected a 1-D array (N,), got shape {getattr(self, name).shape}")
        lo, hi = self.action_bounds
        for name in ("actions", "next_actions"):
            arr = getattr(self, name)
            if arr is not None and (arr.min() < lo - 1e-6 or arr.max() > hi + 1e-6):
                raise ValueError(
                    f"{name}: values in [{arr.min():.3g}, {arr.max():.3g}] lie outside the action bounds [{lo}, {hi}]"
                )

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def obs_dim(self) -> int:
        return self.observations.shape[1]

    @property
    def act_dim(self) -> int:
        return self.actions.shape[1]

    def reward_scale(self) -> float:
        """max |r| over the dataset (1 if all rewards are 0): divide rewards by it to normalise them."""
        m = float(np.abs(self.rewards).max())
        return m if m > 0 else 1.0

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        arrays["action_bounds"] = np.asarray(self.action_bounds, dtype=np.float64)
        np.savez_compressed(path, **arrays)
        return path

    def tensors(self, *, device: torch.device | str = "cpu", reward_scale: float = 1.0) -> dict[str, torch.Tensor]:
        """The training batch fields over all N transitions, float32 on `device`: obs (N, O), actions (N, A),
        rewards (N,) (divided by `reward_scale`), next_obs (N, O), masks (N,) = 1 - terminated and, when stored,
        next_actions (N, A)."""
        arrays = {
            "obs": self.observations,
            "actions": self.actions,
            "rewards": self.rewards / reward_scale,
            "next_obs": self.next_observations,
            "masks": ~self.terminations,
        }
        if self.next_actions is not None:
            arrays["next_actions"] = self.next_actions
        return {k: torch.as_tensor(np.asarray(v, dtype=np.float32), device=device) for k, v in arrays.items()}

    def sampler(self, batch_size: int, *, device: torch.device | str = "cpu", reward_scale: float = 1.0):
        """A `data(step, generator) -> batch` callable for `flowlab.core.train.fit`: uniform minibatches of the
        `tensors` fields."""
        if batch_size < 1:
            raise ValueError(f"batch_size: expected >= 1, got {batch_size}")
        t = self.tensors(device=device, reward_scale=reward_scale)
        n = len(self)

        def data(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
            idx = randint(n, (batch_size,), generator=generator, device=device)
            return {k: v[idx] for k, v in t.items()}

        return data


def load_dataset(path: str | os.PathLike[str]) -> OfflineDataset:
    """Load and validate an npz dataset written by `OfflineDataset.save`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: offline dataset file {path} not found (create it with `flowlab rl collect`)")
    with np.load(path) as z:
        missing = [k for k in _REQUIRED if k not in z.files]
        if missing:
            raise ValueError(f"path: {path} lacks the fields {missing}")
        kwargs = {k: z[k] for k in z.files if k != "action_bounds"}
        if "action_bounds" in z.files:
            kwargs["action_bounds"] = tuple(float(v) for v in z["action_bounds"])
    unknown = set(kwargs) - {f.name for f in fields(OfflineDataset)}
    if unknown:
        raise ValueError(f"path: {path} has unknown fields {sorted(unknown)}")
    return OfflineDataset(**kwargs)
