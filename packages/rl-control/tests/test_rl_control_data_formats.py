"""Minari datasets and D4RL-style HDF5/npz files load into `OfflineDataset` with exactly the transitions written:
each step's observation, action, reward, next observation and end flags, across episode boundaries."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from flowlab.rl_control.data import OfflineDataset, load_d4rl, load_dataset, load_minari

PENDULUM_BOX = {"type": "Box", "dtype": "float32", "shape": [1], "low": [-2.0], "high": [2.0]}


def _assert_transitions(data: OfflineDataset, expected: dict[str, np.ndarray]) -> None:
    for key, value in expected.items():
        got = getattr(data, key)
        assert got.dtype == value.dtype and np.array_equal(got, value), key


def _flat(episodes: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The transitions of `episodes`, written out step by step (step t: observation t -> observation t + 1)."""
    steps = [(ep["observations"][t], ep["actions"][t], ep["rewards"][t], ep["observations"][t + 1],
              ep["terminations"][t], ep["truncations"][t])
             for ep in episodes for t in range(len(ep["actions"]))]  # fmt: skip
    names = ("observations", "actions", "rewards", "next_observations", "terminations", "truncations")
    return {name: np.array(column) for name, column in zip(names, zip(*steps, strict=True), strict=True)}


def test_a_minari_folder_loads_every_step_in_episode_order(tmp_path, make_episodes, write_minari):
    lengths = [3, 1, 2, 4, 1, 2, 3, 1, 2, 2, 3]  # eleven episodes: episode_10 comes after episode_9, not episode_1
    episodes = make_episodes(lengths)
    folder = write_minari(tmp_path / "pendulum-v0", episodes)
    expected = _flat(episodes)
    for path in (folder, folder / "data", folder / "data" / "main_data.hdf5"):
        data = load_minari(path)
        assert len(data) == sum(lengths)
        _assert_transitions(data, expected)
    _assert_transitions(load_dataset(folder), expected)
    _assert_transitions(load_dataset(folder / "data" / "main_data.hdf5"), expected)
    # an episode's last step ends on its own final observation, flagged; the next episode starts afresh
    ends = np.cumsum(lengths) - 1
    assert np.array_equal(data.next_observations[ends], np.stack([ep["observations"][-1] for ep in episodes]))
    assert np.array_equal(np.flatnonzero(data.terminations | data.truncations), ends)
    assert np.array_equal(data.observations[ends[:-1] + 1], np.stack([ep["observations"][0] for ep in episodes[1:]]))


def test_minari_actions_are_rescaled_from_the_metadata_box(tmp_path, make_episodes, write_minari):
    episodes = [{**ep, "actions": 2 * ep["actions"]} for ep in make_episodes([2, 3])]  # Pendulum's torques in [-2, 2]
    data = load_minari(write_minari(tmp_path / "m", episodes, PENDULUM_BOX))
    assert np.array_equal(data.actions, _flat(episodes)["actions"] / 2)
    with pytest.raises(ValueError, match="lie outside the action bounds"):  # without metadata: [-1, 1] expected
        load_minari(write_minari(tmp_path / "raw", episodes))


@pytest.mark.parametrize("suffix", [".hdf5", ".h5", ".npz"])
def test_d4rl_files_without_next_observations_follow_qlearning_dataset(tmp_path, write_d4rl, suffix):
    n = 8
    obs = (np.arange(n * 3).reshape(n, 3) / 8).astype(np.float32)
    arrays = {"observations": obs, "actions": np.linspace(-1, 1, n, dtype=np.float32)[:, None],
              "rewards": np.arange(n, dtype=np.float32), "terminals": np.isin(np.arange(n), [1]),
              "timeouts": np.isin(np.arange(n), [4])}  # fmt: skip
    data = load_dataset(write_d4rl(tmp_path / f"d{suffix}", arrays))
    # steps 4 (a timeout: observation 5 starts the next episode) and 7 (the last: no successor) are dropped
    keep = np.array([0, 1, 2, 3, 5, 6])
    _assert_transitions(data, {"observations": obs[keep], "next_observations": obs[keep + 1],
                               "actions": arrays["actions"][keep], "rewards": arrays["rewards"][keep],
                               "terminations": np.isin(keep, [1]),
                               "truncations": np.isin(keep, [3, 6])})  # fmt: skip


def test_d4rl_files_with_next_observations_keep_every_step(tmp_path, make_episodes, write_d4rl):
    expected = _flat(make_episodes([3, 2, 4]))
    arrays = {**expected, "terminals": expected["terminations"].astype(np.float32), "timeouts": expected["truncations"]}
    del arrays["terminations"], arrays["truncations"]
    arrays["infos/qpos"] = np.zeros((9, 2))  # other entries are ignored
    path = write_d4rl(tmp_path / "d.hdf5", arrays)
    _assert_transitions(load_d4rl(path), expected)
    _assert_transitions(load_dataset(path), expected)


def test_formats_the_loaders_cannot_read_are_named(tmp_path, make_episodes, write_minari, write_d4rl):
    episodes = make_episodes([2, 2])
    arrow = write_minari(tmp_path / "arrow", episodes)
    (arrow / "data" / "metadata.json").write_text(json.dumps({"data_format": "arrow"}))
    with pytest.raises(ValueError, match="'arrow' format"):
        load_dataset(arrow)
    discrete = write_minari(tmp_path / "discrete", episodes, {"type": "Discrete", "n": 3, "start": 0})
    with pytest.raises(ValueError, match="action_space: expected a Box"):
        load_dataset(discrete)
    folder = write_minari(tmp_path / "dict", episodes)
    with h5py.File(folder / "data" / "main_data.hdf5", "a") as file:
        del file["episode_1/observations"]
        file.create_group("episode_1/observations").create_dataset("position", data=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="episode_1/observations is a group"):
        load_dataset(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no Minari data"):
        load_dataset(empty)
    csv = tmp_path / "data.csv"
    csv.write_text("1,2\n")
    with pytest.raises(ValueError, match=r"got '\.csv'"):
        load_dataset(csv)
