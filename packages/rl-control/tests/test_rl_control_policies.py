"""`GymPolicy`: a trained or freshly built agent acting in gymnasium's Pendulum-v1, one copy or a vector env, with
numpy in and out, actions inside the action space, deterministic unless given a seed or generator."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowlab.rl_control.cli import app
from flowlab.rl_control.policies import GymPolicy
from flowlab.rl_control.value_flows.agents import AgentConfig, load_agent, make_agent


@pytest.fixture(scope="module")
def agent():
    config = AgentConfig(method="td", hidden=(16, 16), num_flow_steps=2, num_action_samples=4)
    return make_agent(config, obs_dim=3, act_dim=1, reward_range=(-1.0, 0.0), seed=0)


def test_a_policy_steps_pendulum_with_actions_in_its_box(agent):
    env = gym.make("Pendulum-v1")
    policy = GymPolicy(agent, env.action_space)
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        action = policy(obs)
        assert action.shape == (1,) and action.dtype == env.action_space.dtype and env.action_space.contains(action)
        assert np.array_equal(policy.act(obs), action)  # deterministic: the same observation, the same action
        obs, *_ = env.step(action)
    env.close()
    # the agent's [-1, 1] actions, mapped onto Pendulum's torques in [-2, 2]
    assert np.allclose(policy(obs), 2 * GymPolicy(agent)(obs))


def test_a_seeded_policy_drives_a_vector_env_reproducibly(agent):
    envs = gym.make_vec("Pendulum-v1", num_envs=3, vectorization_mode="sync")
    runs = []
    for _ in range(2):
        policy = GymPolicy(agent, envs.single_action_space, seed=7)
        obs, _ = envs.reset(seed=1)
        actions = []
        for _ in range(4):
            actions.append(policy(obs))
            assert actions[-1].shape == (3, 1) and envs.action_space.contains(actions[-1])
            obs, *_ = envs.step(actions[-1])
        runs.append(np.stack(actions))
    envs.close()
    assert np.array_equal(*runs)
    obs = np.zeros((3, 3), np.float32)
    assert not np.array_equal(policy(obs), policy(obs))  # the seed's noise runs on from call to call
    gen = GymPolicy(agent, generator=torch.Generator().manual_seed(7))
    assert np.array_equal(gen(obs), GymPolicy(agent, seed=7)(obs))


def test_a_run_trained_by_the_cli_acts_through_load_agent(tmp_path):
    data, run = tmp_path / "d.npz", tmp_path / "run"
    runner = CliRunner()
    assert (
        runner.invoke(app, ["collect", "--quality", "random", "--transitions", "64", "--out", str(data)]).exit_code == 0
    )
    args = ["train", "--dataset", str(data), "--method", "td", "--steps", "2", "--batch-size", "8", "--out", str(run)]
    assert runner.invoke(app, args).exit_code == 0
    trained, meta = load_agent(run)
    assert meta["env"] == "pendulum"
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    assert env.action_space.contains(GymPolicy(trained, env.action_space)(obs))
    env.close()


def test_bad_arguments_are_refused_by_name(agent):
    with pytest.raises(ValueError, match="seed, generator"):
        GymPolicy(agent, seed=0, generator=torch.Generator())
    with pytest.raises(ValueError, match="action_space"):
        GymPolicy(agent, gym.spaces.Box(-1.0, 1.0, (2,)))
    with pytest.raises(ValueError, match="action_space"):
        GymPolicy(agent, gym.spaces.Box(-np.inf, np.inf, (1,)))
    for obs in (np.zeros(4), np.zeros((2, 2, 3)), np.full(3, np.nan)):
        with pytest.raises(ValueError, match="obs"):
            GymPolicy(agent)(obs)
