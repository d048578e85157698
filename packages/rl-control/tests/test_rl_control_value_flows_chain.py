"""Value Flows data: gymnasium environments and controllers, the chain MDP's truth."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlab.rl_control.envs.control import collect, evaluate_policy, make_vector_env, reacher_controller
from flowlab.rl_control.value_flows.chain import ChainMDP


def test_unknown_env_id_gives_a_one_line_error():
    with pytest.raises(ValueError) as info:
        make_vector_env("NoSuchEnv-v9", 2)
    assert "NoSuchEnv-v9" in str(info.value) and "\n" not in str(info.value)


def test_reacher_controller_reaches_targets_and_feeds_collectors():
    """The Jacobian-transpose controller ends episodes near the target (random actions do not), and the medium
    collector runs on it; environments without a scripted controller accept quality 'random' only."""
    ctrl = evaluate_policy("Reacher-v5", reacher_controller, n_episodes=8, seed=0, torch_policy=False)
    rng = np.random.default_rng(0)
    rand = evaluate_policy("Reacher-v5", lambda o: rng.uniform(-1, 1, (len(o), 2)), n_episodes=8, seed=0,
                           torch_policy=False)  # fmt: skip
    assert ctrl.mean() > -12 and rand.mean() < -30  # measured: about -6.6 and -43 over 20 episodes
    data = collect("Reacher-v5", "medium", 400, seed=0)
    assert data.obs_dim == 10 and data.act_dim == 2 and len(data) == 400
    with pytest.raises(ValueError, match="no scripted controller"):
        collect("MountainCarContinuous-v0", "medium", 10, seed=0)


def test_chain_monte_carlo_means_match_dynamic_programming():
    mdp = ChainMDP()
    pos, act = mdp.grid(5)
    mc = mdp.monte_carlo_returns(pos, act, 2000, generator=torch.Generator().manual_seed(0))
    q = mdp.exact_q(pos, act)
    z = (mc.mean(1) - q) / (mc.std(1) / math.sqrt(2000))
    assert z.abs().max() < 4.0  # 60 grid points, 4 standard errors
    assert (mc.std(1) > 0.3).all()  # bimodal bonus: genuinely stochastic returns
