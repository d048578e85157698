"""The gymnasium environments the RL package collects data from run offline and are seeded."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


def _rollout(seed: int) -> np.ndarray:
    env = gym.make("Pendulum-v1")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards = []
    for _ in range(20):
        _, r, *_ = env.step(rng.uniform(-2, 2, size=(1,)).astype(np.float32))
        rewards.append(r)
    env.close()
    return np.asarray(rewards)


def test_pendulum_is_reproducible_from_its_seed():
    assert np.array_equal(_rollout(3), _rollout(3))
    assert not np.array_equal(_rollout(3), _rollout(4))


def test_pendulum_reward_is_its_documented_cost():
    env = gym.make("Pendulum-v1")
    env.reset(seed=0)
    theta, theta_dot = env.unwrapped.state
    u = np.array([0.7], dtype=np.float32)
    _, reward, *_ = env.step(u)
    norm = ((theta + np.pi) % (2 * np.pi)) - np.pi
    assert np.isclose(reward, -(norm**2 + 0.1 * theta_dot**2 + 0.001 * 0.7**2), rtol=1e-5)
