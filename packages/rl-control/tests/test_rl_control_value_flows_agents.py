"""Value Flows agents: acting, seeded initialisation, policy evaluation on a two-state MDP, the one-step policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.value_flows.agents import AgentConfig, agent_spaces, make_agent, train_agent

_SPACES = {"obs_dim": 3, "act_dim": 1, "reward_range": (-1.0, 0.0)}


def test_acting_for_many_envs_is_one_network_call_per_flow_step():
    cfg = AgentConfig(method="value_flows")
    agent = make_agent(cfg, **_SPACES)
    calls = []
    agent.actor.net.register_forward_hook(lambda m, i, o: calls.append(o.shape[0]))
    actions = agent.act(torch.randn(50, 3), generator=torch.Generator().manual_seed(0))
    assert actions.shape == (50, 1) and actions.abs().max() <= 1
    assert calls == [50 * cfg.num_action_samples] * cfg.num_flow_steps


def test_seeded_agent_initialisation_ignores_earlier_global_draws():
    config = AgentConfig(method="value_flows", gamma=0.9, hidden=(16,))
    spaces = {"obs_dim": 3, "act_dim": 1, "reward_range": (-1.0, 1.0)}
    first = make_agent(config, **spaces, seed=7)
    torch.rand(1000)  # another agent, a data shuffle, ... consumes the global RNG in between
    state = torch.random.get_rng_state()
    second = make_agent(config, **spaces, seed=7)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is left where it was
    for p, q in zip(first.parameters(), second.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    other = make_agent(config, **spaces, seed=8)
    assert any(not torch.equal(p, q) for p, q in zip(first.parameters(), other.parameters(), strict=True))


def test_bcfm_critic_reaches_the_gaussian_return_law_of_a_two_state_mdp():
    """State A moves to B, B loops on itself, both deterministically, with Gaussian rewards N(mu_s, sigma_s^2). The
    return laws are Gaussian: Z(B) has mean mu_B / (1 - g) and variance sigma_B^2 / (1 - g^2), and Z(A) = r_A + g Z(B).
    A critic trained with BCFM (policy evaluation) matches both means within 5% and both standard deviations within
    20% (10-step Euler narrows a Gaussian: after 300 steps, means +0.3% / +0.2%, standard deviations -11% / +4%).

    DCFM is off here: with random rewards its path r + g phi'_t starts at r + g eps rather than eps, so no DCFM form
    has this law as a fixed point (measured with lambda_d = 1: Z(A) mean 1.17 scaled, Z(B) 1.15 unscaled, vs 1.5, 1.0).
    """
    gamma, mu, sigma = 0.5, (1.0, 0.5), (0.5, 0.3)
    g = torch.Generator().manual_seed(0)
    n = 20000
    state = torch.randint(2, (n,), generator=g)
    reward = torch.tensor(mu)[state] + torch.tensor(sigma)[state] * torch.randn(n, generator=g)
    zeros = np.zeros((n, 1), dtype=np.float32)
    data = OfflineDataset(
        observations=torch.nn.functional.one_hot(state, 2).float().numpy(),
        actions=zeros,
        rewards=reward.numpy(),
        next_observations=torch.nn.functional.one_hot(torch.ones_like(state), 2).float().numpy(),
        terminations=np.zeros(n, bool),
        truncations=np.zeros(n, bool),
        next_actions=zeros,
    )
    config = AgentConfig(
        method="value_flows", gamma=gamma, v_range=(-3.0, 6.0), hidden=(64, 64), lr=1e-3, tau=0.05,
        next_action="dataset", lambda_d=0.0,
    )  # fmt: skip
    agent = make_agent(config, obs_dim=2, act_dim=1, reward_range=(-1.0, 3.0), seed=0)
    train_agent(agent, data, steps=300, batch_size=256, generator=torch.Generator().manual_seed(1))
    mean_b, var_b = mu[1] / (1 - gamma), sigma[1] ** 2 / (1 - gamma**2)
    expected = {0: (mu[0] + gamma * mean_b, (sigma[0] ** 2 + gamma**2 * var_b) ** 0.5), 1: (mean_b, var_b**0.5)}
    with torch.no_grad():
        z = agent.sample_returns(torch.eye(2), torch.zeros(2, 1), 4000, generator=torch.Generator().manual_seed(2))
    for s, (m, sd) in expected.items():
        assert abs(float(z[s].mean()) / m - 1) < 0.05, (s, float(z[s].mean()), m)
        assert abs(float(z[s].std()) / sd - 1) < 0.20, (s, float(z[s].std()), sd)


@pytest.mark.parametrize("method", ["value_flows", "td"])
def test_onestep_policy_trains_only_the_actor_and_acts_in_one_call(method):
    """The one-step policy's loss reaches the one-step and BC networks but not the critic (whose requires_grad flags
    are restored), and acting for N observations is one network call."""
    cfg = AgentConfig(method=method, hidden=(16,), policy_extraction="onestep")
    agent = make_agent(cfg, obs_dim=3, act_dim=2, reward_range=(-1.0, 0.0), seed=0)
    g = torch.Generator().manual_seed(0)
    batch = {"obs": torch.randn(32, 3), "actions": torch.rand(32, 2) * 2 - 1}
    flags = [p.requires_grad for p in agent.critic.parameters()]
    agent.actor_loss(batch, g).backward()
    assert [p.requires_grad for p in agent.critic.parameters()] == flags
    assert all(p.grad is None for p in agent.critic.parameters())
    assert all(p.grad is not None for p in agent.onestep.parameters())
    assert any(p.grad.abs().sum() > 0 for p in agent.actor.parameters())
    calls = []
    agent.onestep.net.register_forward_hook(lambda m, i, o: calls.append(o.shape[0]))
    actions = agent.act(torch.randn(50, 3), generator=g)
    assert actions.shape == (50, 2) and actions.abs().max() <= 1 and calls == [50]
    with pytest.raises(ValueError, match="policy_extraction"):
        AgentConfig(method=method, policy_extraction="argmax")


def test_agent_config_and_make_agent_reject_bad_settings():
    """Each error names the argument: unknown methods, misspelt keys, wrong types, out-of-range values, bad spaces."""
    with pytest.raises(ValueError, match="method"):
        AgentConfig(method="sac")
    with pytest.raises(ValueError, match=r"unknown key.*'gama'"):
        AgentConfig.from_mapping({"gama": 0.9})
    with pytest.raises(ValueError, match="hidden"):
        AgentConfig(hidden=[64, 64])  # a list, not a tuple
    with pytest.raises(ValueError, match="gamma"):
        AgentConfig(gamma=1.0)
    with pytest.raises(ValueError, match="noise_bound"):
        AgentConfig(noise_bound=float("inf"))
    with pytest.raises(ValueError, match="lambda_b, lambda_d"):
        AgentConfig(lambda_b=0.0, lambda_d=0.0)
    with pytest.raises(ValueError, match="onestep"):
        AgentConfig(policy_extraction="onestep", next_action="dataset")
    with pytest.raises(ValueError, match="reward_range"):
        make_agent(AgentConfig(), obs_dim=3, act_dim=1, reward_range=(1.0, -1.0))
    with pytest.raises(ValueError, match="obs_dim"):
        make_agent(AgentConfig(), obs_dim=0, act_dim=1, reward_range=(-1.0, 0.0))
    with pytest.raises(ValueError, match="config"):
        make_agent({"method": "td"}, **_SPACES)


def test_return_range_and_a_saved_agent_rebuilds_from_its_config():
    """The default clip range is [r_min, r_max] / (1 - gamma); config and spaces round-trip through JSON."""
    import json

    agent = make_agent(AgentConfig(method="c51", gamma=0.9, hidden=(8,)), obs_dim=3, act_dim=2, reward_range=(-1, 2))
    lo, hi = agent.return_range
    assert lo == pytest.approx(-10.0) and hi == pytest.approx(20.0)
    assert agent.critic.atoms[0] == pytest.approx(-10.0) and agent.critic.atoms[-1] == pytest.approx(20.0)
    saved = json.loads(json.dumps({"agent": agent.config.to_dict(), "spaces": agent_spaces(agent)}))
    back = make_agent(AgentConfig.from_mapping(saved["agent"]), **saved["spaces"])
    assert back.config == agent.config and back.return_range == agent.return_range
    with pytest.raises(ValueError, match="dims"):
        train_agent(agent, _two_dim_dataset(), steps=1, generator=torch.Generator().manual_seed(0))


def _two_dim_dataset() -> OfflineDataset:
    n = 8
    return OfflineDataset(
        observations=np.zeros((n, 2), np.float32),
        actions=np.zeros((n, 2), np.float32),
        rewards=np.zeros(n, np.float32),
        next_observations=np.zeros((n, 2), np.float32),
        terminations=np.zeros(n, bool),
        truncations=np.zeros(n, bool),
    )
