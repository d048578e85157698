"""Shared fixtures of the rl-control tests: one torch thread, episodes with known values and the writers of Minari
and D4RL-style files."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every rl test on one intra-op thread (the core plugin's `one_thread`)."""


def _write_minari(folder: Path, episodes: list[dict[str, np.ndarray]], action_space: dict | None = None) -> Path:
    """`episodes` (observations (T + 1, O), actions (T, A), rewards, terminations, truncations (T,)) as the Minari
    dataset folder `folder`: data/main_data.hdf5 with one group episode_<i> each, and data/metadata.json holding
    `action_space` (serialised the way Minari does) when given."""
    data = folder / "data"
    data.mkdir(parents=True)
    with h5py.File(data / "main_data.hdf5", "w") as file:
        for i, episode in enumerate(episodes):
            group = file.create_group(f"episode_{i}")
            for key, value in episode.items():
                group[key] = value
    if action_space is not None:
        meta = {"data_format": "hdf5", "total_episodes": len(episodes), "action_space": json.dumps(action_space)}
        (data / "metadata.json").write_text(json.dumps(meta))
    return folder


def _write_d4rl(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """`arrays` as a flat D4RL-style file: HDF5 for .hdf5/.h5, else npz."""
    if path.suffix in (".hdf5", ".h5"):
        with h5py.File(path, "w") as file:
            for key, value in arrays.items():
                file[key] = value
    else:
        np.savez(path, **arrays)
    return path


@pytest.fixture(scope="session")
def write_minari():
    """The function writing episodes as a Minari dataset folder (h5py, no `minari` package)."""
    return _write_minari


@pytest.fixture(scope="session")
def write_d4rl():
    """The function writing arrays as a flat D4RL-style .hdf5/.h5 or .npz file."""
    return _write_d4rl


def _episodes(lengths: list[int], *, obs_dim: int = 3, act_dim: int = 1, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """Episodes of the given lengths T with float32 values on a grid of 1/8 (exact after halving): observations
    (T + 1, O) in [-2, 2], actions (T, A) in [-1, 1], rewards (T,) in [-2, 0]; every other episode ends by
    termination, the others by truncation."""
    rng = np.random.default_rng(seed)
    episodes = []
    for i, t in enumerate(lengths):
        end = np.arange(t) == t - 1
        episodes.append({"observations": (rng.integers(-16, 17, (t + 1, obs_dim)) / 8).astype(np.float32),
                         "actions": (rng.integers(-8, 9, (t, act_dim)) / 8).astype(np.float32),
                         "rewards": (rng.integers(-16, 1, t) / 8).astype(np.float32),
                         "terminations": end & (i % 2 == 0), "truncations": end & (i % 2 == 1)})  # fmt: skip
    return episodes


@pytest.fixture(scope="session")
def make_episodes():
    """The function making episodes with known values (see `_episodes`)."""
    return _episodes
