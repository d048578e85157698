"""MPE simple_spread through mpe2: the force -> mpe2 action map, the scripted behaviour, collection and evaluation."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
import torch

from flowlab.rl_control.envs.spread import (
    SpreadEnvs,
    assignment_costs,
    collect_spread,
    evaluate_spread,
    sample_assignment,
    spread_controller,
    to_env_action,
)


def test_forces_reach_mpe2_as_right_minus_left_and_up_minus_down():
    u = np.array([[0.3, -0.7], [-1.0, 1.0], [2.0, -3.0]])
    env = to_env_action(u)
    assert env.shape == (3, 5) and env.dtype == np.float32 and env.min() >= 0 and env.max() <= 1
    np.testing.assert_allclose(env[:, 2] - env[:, 1], np.clip(u[:, 0], -1, 1), atol=1e-7)
    np.testing.assert_allclose(env[:, 4] - env[:, 3], np.clip(u[:, 1], -1, 1), atol=1e-7)
    assert (env[:, 0] == 0).all()


def test_one_step_moves_an_agent_along_its_force():
    """mpe2's integrator: the velocity after a step from rest is force * sensitivity 5 * dt 0.1 (mass 1)."""
    envs = SpreadEnvs(1, n_agents=2)
    obs = envs.reset(np.array([3]))
    u = np.array([[[0.6, -0.2], [0.0, 0.0]]])
    step = envs.step(u)
    np.testing.assert_allclose(step.observations[0, 0, 0:2], 0.5 * u[0, 0], atol=1e-6)
    np.testing.assert_allclose(step.observations[0, 1, 0:2], 0.0, atol=1e-6)
    assert obs.shape == (1, 2, 12) and step.rewards.shape == (1,)
    with pytest.raises(ValueError, match=r"actions: expected shape \(1, 2, 2\)"):
        envs.step(np.zeros((1, 2, 5)))
    with pytest.raises(ValueError, match=r"actions: contains NaN"):
        envs.step(np.full((1, 2, 2), np.nan))
    envs.close()


def test_assignment_costs_and_a_cold_boltzmann_choice_pick_the_cheapest_assignment():
    obs = np.zeros((1, 3, 18))
    # agent i sees landmark j at (i - j, 0): the identity assignment costs 0, any other more
    for i in range(3):
        obs[0, i, 4:10] = np.array([[i - j, 0.0] for j in range(3)]).ravel()
    perms = np.array(list(permutations(range(3))))
    costs = assignment_costs(obs, perms)
    assert costs.shape == (1, 6) and costs[0, 0] == 0 and (costs[0, 1:] > 0).all()
    rng = np.random.default_rng(0)
    picks = sample_assignment(np.repeat(obs, 200, 0), 1e-3, rng)
    assert (picks == np.arange(3)).all()
    hot = sample_assignment(np.repeat(obs, 2000, 0), 1e3, rng)  # near-uniform over the 6 assignments
    assert len({tuple(p) for p in hot}) == 6


def test_scripted_expert_beats_random_and_collection_has_the_agent_axis():
    data = collect_spread("expert", 250, seed=0, n_agents=2)
    assert data.observations.shape == (250, 2, 12) and data.actions.shape == (250, 2, 2)
    assert data.rewards.shape == (250,) and data.truncations.sum() == 10  # 10 whole episodes of 25 steps
    again = collect_spread("expert", 250, seed=0, n_agents=2)
    np.testing.assert_array_equal(again.actions, data.actions)  # seeded
    rng = np.random.default_rng(0)
    expert = evaluate_spread(
        lambda o: torch.as_tensor(spread_controller(o.numpy(), sample_assignment(o.numpy(), 0.05, rng))),
        n_episodes=8,
        seed=1,
        n_agents=2,
    )
    random = evaluate_spread(lambda o: torch.rand(o.shape[0], 2, 2) * 2 - 1, n_episodes=8, seed=1, n_agents=2)
    assert expert.mean() > random.mean() + 5  # measured over 50 episodes: about -6.4 and -20
    with pytest.raises(ValueError, match=r"quality: expected one of"):
        collect_spread("great", 10, seed=0)
    with pytest.raises(ValueError, match=r"n_agents: expected an integer >= 2"):
        SpreadEnvs(1, n_agents=1)
