"""Offline-to-online fine-tuning: `OnlineReplay`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.envs.control import collect
from flowlab.rl_control.value_flows.agents import AgentConfig, make_agent
from flowlab.rl_control.value_flows.online import OnlineReplay


def test_online_replay_grows_by_one_batched_env_step_per_batch():
    data = collect("Pendulum-v1", "random", 300, seed=0)
    cfg = AgentConfig(method="td", hidden=(16,), num_action_samples=4)
    agent = make_agent(cfg, obs_dim=3, act_dim=1, reward_range=(-2.0, 0.0), seed=0)
    calls = []
    agent.actor.net.register_forward_hook(lambda m, i, o: calls.append(o.shape[0]))
    replay = OnlineReplay(data, agent, "Pendulum-v1", steps=210, seed=0, n_envs=3)
    sample = replay.sampler(64, reward_scale=2.0)
    g = torch.Generator().manual_seed(0)
    for step in range(205):
        batch = sample(step, g)
    assert replay.size == 300 + 205 * 3
    assert calls == [3 * 4] * (cfg.num_flow_steps * 205)  # one batched call per flow step for all envs
    assert len(replay.episode_returns) == 3  # Pendulum truncates at 200 steps
    assert batch["obs"].shape == (64, 3) and batch["rewards"].abs().max() <= 8.5 / 2.0 + 3.0  # scaled, noisy
    for _ in range(5):
        sample(0, g)
    with pytest.raises(RuntimeError, match="full"):
        sample(0, g)
    with pytest.raises(ValueError, match="reward_scale"):
        replay.sampler(64, reward_scale=1.0)
    replay.close()
    with pytest.raises(ValueError, match="observations"):
        OnlineReplay(data, agent, "MountainCarContinuous-v0", steps=10, seed=0)
    two_d = OfflineDataset(
        observations=data.observations,
        actions=np.zeros((300, 2), np.float32),
        rewards=data.rewards,
        next_observations=data.next_observations,
        terminations=data.terminations,
        truncations=data.truncations,
    )
    with pytest.raises(ValueError, match="actions"):  # Pendulum has one action
        OnlineReplay(two_d, agent, "Pendulum-v1", steps=10, seed=0)


def test_online_replay_samplers_share_one_buffer():
    """A second sampler (training in chunks) continues the same buffer: no zero rows appear."""
    data = collect("Pendulum-v1", "random", 100, seed=0)
    cfg = AgentConfig(method="td", hidden=(8,), num_action_samples=2)
    agent = make_agent(cfg, obs_dim=3, act_dim=1, reward_range=(-2.0, 0.0), seed=0)
    replay = OnlineReplay(data, agent, "Pendulum-v1", steps=40, seed=0)
    g = torch.Generator().manual_seed(0)
    for sample in (replay.sampler(32), replay.sampler(32)):
        for step in range(20):
            batch = sample(step, g)
            assert (batch["obs"].abs().sum(1) > 0).all()  # Pendulum observations are never all zero
    assert replay.size == 140
    replay.close()


def test_online_replay_caps_its_episodes_at_max_episode_steps():
    data = collect("Pendulum-v1", "random", 100, seed=0)
    cfg = AgentConfig(method="td", hidden=(8,), num_action_samples=2)
    agent = make_agent(cfg, obs_dim=3, act_dim=1, reward_range=(-2.0, 0.0), seed=0)
    replay = OnlineReplay(data, agent, "Pendulum-v1", steps=25, seed=0, n_envs=2, max_episode_steps=10)
    sample, g = replay.sampler(16), torch.Generator().manual_seed(0)
    for step in range(25):
        sample(step, g)
    assert len(replay.episode_returns) == 2 * 2  # two 10-step episodes per copy; Pendulum's own limit is 200
    replay.close()
