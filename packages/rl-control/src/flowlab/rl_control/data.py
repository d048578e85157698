"""Offline datasets: transitions in episode order, stored as npz, validated on construction and load; single-agent
or with an agent axis.

Fields (T transitions): observations (T, O) or (T, N, O) for N agents, actions (T, A) or (T, N, A), rewards (T,) (a
team reward when there is an agent axis) or (T, N) (one per agent), next_observations like observations,
terminations (T,) bool, truncations (T,) bool, optionally next_actions like actions (the behaviour policy's next
action, for policy evaluation). Rewards are stored raw; `reward_scale` normalises them for training.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from flowlab.core.distributions import randint

__all__ = ["TRANSITION_FIELDS", "OfflineDataset", "load_dataset"]

#: the fields every transition has, in the order collectors gather them
TRANSITION_FIELDS = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations")
_PER_AGENT = ("observations", "actions", "next_observations", "next_actions")


@dataclass(frozen=True)
class OfflineDataset:
    """Transitions of an offline RL dataset (see the module docstring). Validated on construction: equal lengths,
    finite values, observations and actions with one agent axis or none (the same number of agents in every field),
    and, with `action_bounds`, actions inside them."""

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
        if self.observations.ndim not in (2, 3):
            raise ValueError(
                f"observations: expected (T, O) or, with an agent axis, (T, N, O), got shape {self.observations.shape}"
            )
        for name in _PER_AGENT:
            arr = getattr(self, name)
            if arr is None:
                continue
            if arr.ndim != self.observations.ndim:
                raise ValueError(
                    f"{name}: expected {self.observations.ndim} dimensions like observations, got shape {arr.shape}"
                )
            if arr.ndim == 3 and arr.shape[1] != self.observations.shape[1]:
                raise ValueError(
                    f"{name}: expected {self.observations.shape[1]} agents like observations, got {arr.shape[1]} "
                    "(wrong agent count)"
                )
        if self.observations.shape != self.next_observations.shape:
            raise ValueError("next_observations: expected the shape of observations")
        if self.next_actions is not None and self.next_actions.shape != self.actions.shape:
            raise ValueError("next_actions: expected the shape of actions")
        reward_shapes = [(n,)] + ([(n, self.n_agents)] if self.multi_agent else [])
        if self.rewards.shape not in reward_shapes:
            raise ValueError(
                f"rewards: expected shape {' or '.join(map(str, reward_shapes))}, got {self.rewards.shape}"
            )
        for name in ("terminations", "truncations"):
            if getattr(self, name).ndim != 1:
                raise ValueError(f"{name}: expected a 1-D array (T,), got shape {getattr(self, name).shape}")
        lo, hi = self.action_bounds
        for name in ("actions", "next_actions"):
            arr = getattr(self, name)
            if arr is not None and (arr.min() < lo - 1e-6 or arr.max() > hi + 1e-6):
                raise ValueError(
                    f"{name}: values in [{arr.min():.3g}, {arr.max():.3g}] lie outside the action bounds [{lo}, {hi}]"
                )

    @classmethod
    def from_rollout(cls, steps: Mapping[str, Sequence[np.ndarray]], n_transitions: int) -> OfflineDataset:
        """Transitions gathered one vectorised step at a time in E environment copies: `steps` maps observations,
        actions, rewards, next_observations, terminations and truncations to lists of per-step arrays (E, ...).
        Returns them in copy-major order (each copy's steps contiguous, so its episodes stay whole), cut to the first
        `n_transitions`, floats as float32."""
        stack = {k: np.stack(v, 1).reshape(-1, *np.asarray(v[0]).shape[1:])[:n_transitions] for k, v in steps.items()}
        flags = ("terminations", "truncations")
        return cls(**{k: v.astype(bool if k in flags else np.float32) for k, v in stack.items()})

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def multi_agent(self) -> bool:
        """Whether the transitions have an agent axis."""
        return self.observations.ndim == 3

    @property
    def n_agents(self) -> int:
        """N, the size of the agent axis (1 without one)."""
        return self.observations.shape[1] if self.multi_agent else 1

    @property
    def obs_dim(self) -> int:
        return self.observations.shape[-1]

    @property
    def act_dim(self) -> int:
        return self.actions.shape[-1]

    def check_agents(self, n_agents: int | None) -> None:
        """Refuse data whose agent axis does not match: `n_agents` agents, or None for single-agent transitions."""
        if n_agents is None and self.multi_agent:
            raise ValueError(
                f"dataset: expected single-agent transitions (T, O), got an agent axis of {self.n_agents} agents"
            )
        if n_agents is not None and (not self.multi_agent or self.n_agents != n_agents):
            got = f"{self.n_agents} agents" if self.multi_agent else "no agent axis"
            raise ValueError(f"dataset: expected {n_agents} agents (T, {n_agents}, O), got {got} (wrong agent count)")

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
        """The training batch fields over all T transitions, float32 on `device`: obs (T, [N,] O), actions
        (T, [N,] A), rewards (T,) or (T, N) (divided by `reward_scale`), next_obs like obs, masks (T,) = 1 - terminated
        and, when stored, next_actions like actions."""
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
        raise FileNotFoundError(
            f"path: offline dataset file {path} not found (create it with `flowlab rl collect` or `marl-collect`)"
        )
    if not zipfile.is_zipfile(path):  # before np.load, which would take any other bytes for a pickle
        what = "an empty file" if path.stat().st_size == 0 else "not an npz archive (corrupt or another format)"
        raise ValueError(f"path: {path} is not a readable npz dataset: {what}")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in TRANSITION_FIELDS if k not in z.files]
            if missing:
                raise ValueError(f"path: {path} lacks the fields {missing}")
            kwargs = {k: z[k] for k in z.files if k != "action_bounds"}
            if "action_bounds" in z.files:
                kwargs["action_bounds"] = tuple(float(v) for v in z["action_bounds"])
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as err:
        if str(err).startswith("path: "):
            raise
        raise ValueError(f"path: {path} is not a readable npz dataset ({err})") from None
    unknown = set(kwargs) - {f.name for f in fields(OfflineDataset)}
    if unknown:
        raise ValueError(f"path: {path} has unknown fields {sorted(unknown)}")
    try:
        return OfflineDataset(**kwargs)
    except ValueError as err:
        raise ValueError(f"path: {path}: {err}") from None
