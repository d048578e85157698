"""Offline datasets: transitions in episode order, stored as npz, validated on construction and load; single-agent
or with an agent axis. They also load from Minari datasets and D4RL-style flat HDF5 or npz files (`load_dataset`
picks the reader by extension and layout).

Fields (T transitions): observations (T, O) or (T, N, O) for N agents, actions (T, A) or (T, N, A), rewards (T,) (a
team reward when there is an agent axis) or (T, N) (one per agent), next_observations like observations,
terminations (T,) bool, truncations (T,) bool, optionally next_actions like actions (the behaviour policy's next
action, for policy evaluation). Rewards are stored raw; `reward_scale` normalises them for training.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from flowlab.core.distributions import randint

__all__ = [
    "D4RL_FIELDS",
    "MINARI_FIELDS",
    "TRANSITION_FIELDS",
    "OfflineDataset",
    "load_d4rl",
    "load_dataset",
    "load_minari",
]

#: the fields every transition has, in the order collectors gather them
TRANSITION_FIELDS = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations")
_PER_AGENT = ("observations", "actions", "next_observations", "next_actions")
_HDF5 = (".hdf5", ".h5")
#: the arrays of a D4RL-style file over its N steps (`next_observations` may come beside them)
D4RL_FIELDS = ("observations", "actions", "rewards", "terminals", "timeouts")
#: the arrays of each episode of a Minari dataset (observations hold one step more than the others)
MINARI_FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")
_EPISODE = re.compile(r"episode_(\d+)")
_T = TypeVar("_T")


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
        """The observation size O (the last axis of `observations`)."""
        return self.observations.shape[-1]

    @property
    def act_dim(self) -> int:
        """The action size A (the last axis of `actions`)."""
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
        """Writes the arrays and `action_bounds` to a compressed npz file at `path` (parents created); returns the
        path."""
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
    """Load and validate an offline dataset, the reader chosen by the path: a folder is a Minari dataset
    (`load_minari`); an `.hdf5`/`.h5` file is Minari's main_data.hdf5 when it holds `episode_<id>` groups, else a
    D4RL-style flat file (`load_d4rl`); an `.npz` file is this package's own (`OfflineDataset.save`) or, when it
    holds terminals or timeouts, a D4RL-style one. Any other file is refused."""
    path = Path(path)
    if path.is_dir():
        return load_minari(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"path: offline dataset file {path} not found (create it with `flowlab rl collect` or `marl-collect`)"
        )
    if path.suffix in _HDF5:
        minari = _read_hdf5(path, lambda file: any(_EPISODE.fullmatch(key) for key in file))
        return load_minari(path) if minari else load_d4rl(path)
    if path.suffix != ".npz":
        raise ValueError(
            f"path: {path}: expected an .npz, .hdf5 or .h5 file or a Minari dataset folder, got {path.suffix!r}"
        )
    arrays = _read_npz(path)
    if "terminals" in arrays or "timeouts" in arrays:
        return _d4rl_dataset(arrays, path)
    missing = [k for k in TRANSITION_FIELDS if k not in arrays]
    if missing:
        raise ValueError(f"path: {path} lacks the fields {missing}")
    unknown = set(arrays) - {f.name for f in fields(OfflineDataset)}
    if unknown:
        raise ValueError(f"path: {path} has unknown fields {sorted(unknown)}")
    kwargs: dict[str, Any] = {k: v for k, v in arrays.items() if k != "action_bounds"}
    if "action_bounds" in arrays:
        kwargs["action_bounds"] = tuple(float(v) for v in arrays["action_bounds"])
    return _checked(path, lambda: OfflineDataset(**kwargs))


def load_d4rl(path: str | os.PathLike[str]) -> OfflineDataset:
    """A D4RL-style dataset: one flat HDF5 (`.hdf5`/`.h5`) or npz file of arrays over N steps in episode order,
    observations (N, O), actions (N, A) in [-1, 1], rewards (N,), terminals (N,) and timeouts (N,) (bools or 0/1:
    the episode terminated, or its time limit cut it, at that step) and optionally next_observations (N, O); other
    entries (infos, metadata) are ignored. With next_observations every step is a transition (truncations =
    timeouts). Without them the transitions are D4RL's `qlearning_dataset`: step i goes to observation i + 1, the
    steps without a successor in the data (timeouts, whose next observation starts another episode, and the last
    step) are dropped, and a step before a dropped one ends its episode by truncation unless it terminated."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: D4RL-style dataset file {path} not found")
    if path.suffix in _HDF5:
        keys = (*D4RL_FIELDS, "next_observations")
        return _d4rl_dataset(_read_hdf5(path, lambda file: _hdf5_arrays(file, keys, "")), path)
    if path.suffix == ".npz":
        return _d4rl_dataset(_read_npz(path), path)
    raise ValueError(f"path: {path}: expected a D4RL-style .hdf5, .h5 or .npz file, got {path.suffix!r}")


def load_minari(path: str | os.PathLike[str]) -> OfflineDataset:
    """A Minari dataset, read with h5py (the `minari` package is not needed): `path` is its folder (holding
    data/main_data.hdf5), that data folder or the main_data.hdf5 file. Each episode, a group `episode_<id>` (read in
    id order), holds observations (T + 1, O), actions (T, A), rewards (T,), terminations (T,) and truncations (T,);
    its step t goes from observation t to observation t + 1. Actions are rescaled to [-1, 1] from the Box of the
    action_space in metadata.json (beside main_data.hdf5, where Minari writes it); without that file they must lie
    in [-1, 1] already. Only Minari's HDF5 format with Box spaces is read (not its arrow format)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: Minari dataset {path} not found")
    folder = path.parent if path.is_file() else path / "data" if (path / "data").is_dir() else path
    meta = _minari_metadata(folder / "metadata.json")
    if meta.get("data_format", "hdf5") != "hdf5":
        raise ValueError(f"path: {folder} holds Minari's {meta['data_format']!r} format; only HDF5 is read")
    file = path if path.is_file() else folder / "main_data.hdf5"
    if not file.is_file():
        raise FileNotFoundError(f"path: {path} holds no Minari data: {file} not found")
    episodes = _read_hdf5(file, _minari_episodes)
    return _checked(file, lambda: _minari_transitions(episodes, meta.get("action_space")))


def _checked(path: Path, build: Callable[[], _T]) -> _T:
    """`build()`, a ValueError it raises prefixed with `path: <path>: ` (the file the values came from)."""
    try:
        return build()
    except ValueError as err:
        raise ValueError(f"path: {path}: {err}") from None


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the npz archive at `path`, pickles refused."""
    if not zipfile.is_zipfile(path):  # before np.load, which would take any other bytes for a pickle
        what = "an empty file" if path.stat().st_size == 0 else "not an npz archive (corrupt or another format)"
        raise ValueError(f"path: {path} is not a readable npz dataset: {what}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as err:
        raise ValueError(f"path: {path} is not a readable npz dataset ({err})") from None


def _read_hdf5(path: Path, read: Callable[[Any], _T]) -> _T:
    """`read(file)` on the HDF5 file at `path`, opened read-only; an unreadable file, or a ValueError of `read`, is a
    `path: ...` ValueError."""
    import h5py

    if not h5py.is_hdf5(path):
        what = "an empty file" if path.stat().st_size == 0 else "not an HDF5 file (corrupt or another format)"
        raise ValueError(f"path: {path} is not a readable HDF5 dataset: {what}")
    try:
        with h5py.File(path, "r") as file:
            return read(file)
    except (OSError, KeyError) as err:  # a truncated file: its objects do not open
        raise ValueError(f"path: {path} is not a readable HDF5 dataset ({err})") from None
    except ValueError as err:
        raise ValueError(f"path: {path}: {err}") from None


def _hdf5_arrays(group: Any, keys: Sequence[str], where: str) -> dict[str, np.ndarray]:
    """The arrays of the HDF5 `group` named in `keys` (those it has); `where` prefixes the names in errors."""
    import h5py

    arrays = {}
    for key in keys:
        if key not in group:
            continue
        if not isinstance(group[key], h5py.Dataset):
            raise ValueError(f"{where}{key} is a group (a dict or tuple space); only arrays (Box spaces) are read")
        arrays[key] = np.asarray(group[key][()])
        if arrays[key].ndim == 0:
            raise ValueError(f"{where}{key}: expected an array over steps, got a scalar")
    return arrays


def _steps(arrays: Mapping[str, np.ndarray], n: int, where: str = "") -> None:
    """Refuse arrays that are not n steps long (`where` prefixes the names in errors)."""
    for key, arr in arrays.items():
        length = len(arr) if arr.ndim else None
        if length != n:
            raise ValueError(f"{where}{key}: expected {n} steps, got {length} (ragged lengths)")


def _floats(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name}: expected numbers, got dtype {arr.dtype}")
    return arr.astype(np.float32)


def _flags(arr: np.ndarray, name: str) -> np.ndarray:
    if arr.ndim != 1 or not (arr.dtype == bool or (arr.dtype.kind in "iuf" and np.isin(arr, (0, 1)).all())):
        raise ValueError(f"{name}: expected a 1-D array of booleans or 0/1, got shape {arr.shape}, dtype {arr.dtype}")
    return arr.astype(bool)


def _d4rl_dataset(arrays: Mapping[str, np.ndarray], path: Path) -> OfflineDataset:
    missing = [k for k in D4RL_FIELDS if k not in arrays]
    if missing:
        raise ValueError(f"path: {path} lacks the D4RL fields {missing}")
    return _checked(path, lambda: _d4rl_transitions(arrays))


def _d4rl_transitions(arrays: Mapping[str, np.ndarray]) -> OfflineDataset:
    """`load_d4rl`'s transitions from its arrays, checked."""
    arrays = {k: np.asarray(v) for k, v in arrays.items() if k in (*D4RL_FIELDS, "next_observations")}
    if arrays["observations"].ndim == 0:
        raise ValueError("observations: expected an array over steps, got a scalar")
    _steps(arrays, len(arrays["observations"]))
    obs, actions, rewards = (_floats(arrays[k], k) for k in ("observations", "actions", "rewards"))
    term, timeout = (_flags(arrays[k], k) for k in ("terminals", "timeouts"))
    if "next_observations" in arrays:
        next_obs = _floats(arrays["next_observations"], "next_observations")
        return OfflineDataset(obs, actions, rewards, next_obs, term, timeout)
    keep = np.flatnonzero(~timeout[:-1])
    cut = np.append(timeout[1:-1], True) & ~term[:-1]  # step i's successor i + 1 is dropped, and i did not terminate
    return OfflineDataset(obs[keep], actions[keep], rewards[keep], obs[keep + 1], term[keep], cut[keep])


def _minari_metadata(path: Path) -> dict[str, Any]:
    """Minari's metadata.json at `path` ({} when there is none)."""
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"path: {path} is not readable JSON ({err})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"path: {path}: expected Minari's metadata (a JSON object), got {type(meta).__name__}")
    return meta


def _minari_episodes(file: Any) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(name, arrays) of every episode group of Minari's main_data.hdf5, in id order."""
    found = sorted((m for m in map(_EPISODE.fullmatch, file) if m), key=lambda m: int(m.group(1)))
    names = [m.group(0) for m in found]
    if not names:
        raise ValueError("no episodes (groups episode_<id>): not a Minari main_data.hdf5")
    episodes = []
    for name in names:
        missing = [k for k in MINARI_FIELDS if k not in file[name]]
        if missing:
            raise ValueError(f"{name} lacks {missing}")
        episodes.append((name, _hdf5_arrays(file[name], MINARI_FIELDS, f"{name}/")))
    return episodes


def _minari_transitions(episodes: Sequence[tuple[str, dict[str, np.ndarray]]], action_space: Any) -> OfflineDataset:
    """`load_minari`'s transitions from its episodes, checked, actions rescaled from `action_space`."""
    for name, ep in episodes:
        steps = len(ep["actions"])
        if len(ep["observations"]) != steps + 1:
            raise ValueError(f"{name}: {len(ep['observations'])} observations for {steps} actions (expected one "
                             "observation more than actions, the last one after the last step)")  # fmt: skip
        _steps({k: ep[k] for k in ("rewards", "terminations", "truncations")}, steps, f"{name}/")

    def cat(key: str, part: slice = slice(None)) -> np.ndarray:
        return np.concatenate([ep[key][part] for _, ep in episodes])

    actions = _unit_actions(_floats(cat("actions"), "actions"), action_space)
    obs, next_obs = (_floats(cat("observations", part), "observations") for part in (slice(-1), slice(1, None)))
    flags = (_flags(cat(k), k) for k in ("terminations", "truncations"))
    return OfflineDataset(obs, actions, _floats(cat("rewards"), "rewards"), next_obs, *flags)


def _unit_actions(actions: np.ndarray, action_space: Any) -> np.ndarray:
    """actions (T, A) from the Box `action_space` (Minari's serialised space; None: already in [-1, 1]) to [-1, 1]."""
    if action_space is None:
        return actions
    box = json.loads(action_space) if isinstance(action_space, str) else action_space
    if not isinstance(box, Mapping) or box.get("type") != "Box":
        kind = box.get("type") if isinstance(box, Mapping) else type(box).__name__
        raise ValueError(f"action_space: expected a Box in metadata.json, got {kind}")
    low, high = (np.asarray(box.get(k, np.nan), dtype=np.float64) for k in ("low", "high"))
    if not (np.isfinite(low).all() and np.isfinite(high).all() and (high > low).all()):
        raise ValueError("action_space: expected a bounded Box (finite low < high) to rescale the actions to [-1, 1]")
    return (2.0 * (actions - low) / (high - low) - 1.0).astype(np.float32)
