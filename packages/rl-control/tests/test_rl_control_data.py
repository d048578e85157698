"""The offline dataset: its checks, with and without an agent axis, and the npz round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.rl_control.data import OfflineDataset, load_dataset


def _dataset(n_agents: int | None = None, **overrides):
    n = 10
    agents = () if n_agents is None else (n_agents,)
    fields = dict(
        observations=np.zeros((n, *agents, 3), np.float32),
        actions=np.zeros((n, *agents, 1), np.float32),
        rewards=np.zeros(n, np.float32),
        next_observations=np.zeros((n, *agents, 3), np.float32),
        terminations=np.zeros(n, bool),
        truncations=np.zeros(n, bool),
    )
    fields.update(overrides)
    return OfflineDataset(**fields)


def test_dataset_validation_rejects_bad_data(tmp_path):
    with pytest.raises(ValueError, match=r"rewards.*mismatched"):
        _dataset(rewards=np.zeros(9, np.float32))
    with pytest.raises(ValueError, match=r"rewards.*NaN"):
        _dataset(rewards=np.array([0.0] * 9 + [np.nan], np.float32))
    with pytest.raises(ValueError, match=r"actions.*outside the action bounds"):
        _dataset(actions=np.full((10, 1), 1.5, np.float32))
    ds = _dataset(rewards=np.arange(10, dtype=np.float32))
    back = load_dataset(ds.save(tmp_path / "d.npz"))
    np.testing.assert_array_equal(back.rewards, ds.rewards)
    with pytest.raises(FileNotFoundError, match="flowlab rl collect"):
        load_dataset(tmp_path / "missing.npz")


def test_agent_axis_round_trips_and_batches(tmp_path):
    ds = _dataset(3, rewards=np.arange(10, dtype=np.float32))
    assert ds.multi_agent and ds.n_agents == 3 and ds.obs_dim == 3 and ds.act_dim == 1
    back = load_dataset(ds.save(tmp_path / "marl.npz"))
    assert back.n_agents == 3
    np.testing.assert_array_equal(back.observations, ds.observations)
    batch = ds.sampler(4)(0, torch.Generator().manual_seed(0))
    assert batch["obs"].shape == (4, 3, 3) and batch["actions"].shape == (4, 3, 1) and batch["rewards"].shape == (4,)
    per_agent = _dataset(3, rewards=np.zeros((10, 3), np.float32))
    assert per_agent.tensors()["rewards"].shape == (10, 3)
    ds.check_agents(3)
    _dataset().check_agents(None)


def test_malformed_multi_agent_data_names_the_field():
    with pytest.raises(ValueError, match=r"actions: expected 3 agents like observations, got 2 \(wrong agent count\)"):
        _dataset(3, actions=np.zeros((10, 2, 1), np.float32))
    with pytest.raises(ValueError, match=r"next_observations: expected 3 dimensions"):
        _dataset(3, next_observations=np.zeros((10, 3), np.float32))
    with pytest.raises(ValueError, match=r"rewards: expected shape \(10,\) or \(10, 3\)"):
        _dataset(3, rewards=np.zeros((10, 2), np.float32))
    with pytest.raises(ValueError, match=r"rewards: contains NaN"):
        _dataset(3, rewards=np.array([np.nan] + [0.0] * 9, np.float32))
    with pytest.raises(ValueError, match=r"observations: expected \(T, O\) or"):
        _dataset(observations=np.zeros((10, 3, 2, 2), np.float32))
    with pytest.raises(ValueError, match=r"dataset: expected 2 agents .*got 3 agents"):
        _dataset(3).check_agents(2)
    with pytest.raises(ValueError, match=r"dataset: expected single-agent"):
        _dataset(3).check_agents(None)
    with pytest.raises(ValueError, match=r"dataset: expected 3 agents .*no agent axis"):
        _dataset().check_agents(3)


def test_corrupt_or_foreign_files_give_one_line_errors(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip archive")
    with pytest.raises(ValueError, match=r"path: .* is not a readable npz dataset"):
        load_dataset(bad)
    arr = tmp_path / "arr.npy"
    np.save(arr, np.zeros(3))
    with pytest.raises(ValueError, match=r"expected an \.npz, \.hdf5 or \.h5 file or a Minari dataset folder"):
        load_dataset(arr)
    np.save(tmp_path / "arr.npz.npy", np.zeros(3))
    with pytest.raises(ValueError, match=r"not an npz archive"):
        load_dataset((tmp_path / "arr.npz.npy").rename(tmp_path / "arr.npz"))
    partial = tmp_path / "partial.npz"
    np.savez(partial, observations=np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"lacks the fields"):
        load_dataset(partial)
