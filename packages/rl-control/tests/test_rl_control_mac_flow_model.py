"""MAC-Flow's networks and losses: the joint flow keeps a two-mode joint, the distillation target is the flow's
integrated action at the same joint noise, decentralised policies see only their own observation, per-agent networks
are permutation-equivariant, and the mixers' derivatives and the TD target are what they claim."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.core.distributions import randn
from flowlab.core.nets import zero_init
from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.mac_flow import (
    FactorisedCritic,
    JointFlowBC,
    MARLConfig,
    make_learner,
    mode_weights,
    train_marl,
    with_agent_ids,
)
from flowlab.rl_control.mac_flow.model import DecentralisedOneStepPolicy
from flowlab.rl_control.mac_flow.objective import distillation_loss, td_loss
from flowlab.rl_control.networks import aggregate


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _two_mode_data(n: int = 4000, weight: float = 0.7) -> tuple[OfflineDataset, torch.Tensor]:
    """Two agents in one constant state: joint modes ((0.6, 0.6), (-0.6, -0.6)) with probability `weight`, else the
    reverse; noise 0.05. The modes coordinate the agents: each agent's marginal is the same in both."""
    modes = torch.tensor([[[0.6, 0.6], [-0.6, -0.6]], [[-0.6, -0.6], [0.6, 0.6]]])
    g = _g(0)
    pick = (torch.rand(n, generator=g) >= weight).long()
    acts = (modes[pick] + 0.05 * randn((n, 2, 2), generator=g)).clamp(-1, 1)
    obs = np.zeros((n, 2, 1), np.float32)
    data = OfflineDataset(obs, acts.numpy(), np.ones(n, np.float32), obs, np.ones(n, bool), np.zeros(n, bool))
    return data, modes


def _zero_critic(obs_dim: int, act_dim: int, n_agents: int) -> FactorisedCritic:
    critic = FactorisedCritic(obs_dim, act_dim, n_agents, (16,))
    for net in critic.online["q"]:
        zero_init(net.out)
    return critic


def test_joint_flow_recovers_both_modes_of_a_two_mode_joint_within_5_percent():
    data, modes = _two_mode_data()
    agent = make_learner(
        MARLConfig(method="joint_flow", hidden=(64, 64), lr=1e-3), obs_dim=1, act_dim=2, n_agents=2, seed=0
    )
    train_marl(agent, data, steps=1500, batch_size=256, generator=_g(0))
    samples = agent.act(torch.zeros(4000, 2, 1), generator=_g(1))  # 10 clipped Euler steps
    weights = mode_weights(samples, modes)
    assert abs(float(weights[0]) - 0.7) < 0.05 and abs(float(weights[1]) - 0.3) < 0.05
    # coordinated: an agent's action sign determines the other's (a product of marginals would mix them)
    assert float((samples[:, 0, 0].sign() != samples[:, 1, 0].sign()).double().mean()) > 0.95


def test_distillation_target_is_the_joint_flows_action_at_the_same_noise():
    """With Q = 0 the loss is alpha E||mu(o_i, eps_i) - phi_BC(eps)_i||^2, eps one joint draw from the generator."""
    flow = JointFlowBC(3, 2, 4, (16,))
    policy = DecentralisedOneStepPolicy(3, 2, 4, (16,))
    obs = torch.randn(8, 4, 3, generator=_g(0))
    loss = distillation_loss(policy, flow, _zero_critic(3, 2, 4), obs, alpha=2.5, normalize_q=True, generator=_g(5))
    noise = randn((8, 4, 2), generator=_g(5))
    with torch.no_grad():
        target = flow.sample(obs, noise=noise)
        expected = 2.5 * (policy(obs, noise) - target).square().sum(-1).mean()
    torch.testing.assert_close(loss.detach(), expected)


def test_distilled_policy_with_q_zero_reproduces_the_per_agent_flow_pointwise():
    """alpha -> infinity (Q = 0): the one-step policy regresses onto phi_BC(eps). For the per-agent flow agent i's
    action depends on eps_i alone, so the regression can be exact; measured error 7e-4."""
    data, _ = _two_mode_data()
    config = MARLConfig(method="joint_flow", bc_flow="per_agent", hidden=(64, 64), lr=1e-3)
    flow_bc = make_learner(config, obs_dim=1, act_dim=2, n_agents=2, seed=0)
    train_marl(flow_bc, data, steps=300, batch_size=256, generator=_g(0))
    policy, critic = DecentralisedOneStepPolicy(1, 2, 2, (64, 64)), _zero_critic(1, 2, 2)
    opt = torch.optim.Adam(policy.parameters(), 2e-3)
    obs, g = torch.zeros(128, 2, 1), _g(3)
    for _ in range(800):
        loss = distillation_loss(policy, flow_bc.flow, critic, obs, alpha=1.0, normalize_q=True, generator=g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    noise = randn((2000, 2, 2), generator=_g(9))
    with torch.no_grad():
        error = policy(torch.zeros(2000, 2, 1), noise) - flow_bc.flow.sample(torch.zeros(2000, 2, 1), noise=noise)
    assert float(error.square().sum(-1).mean()) < 1e-2


@pytest.mark.parametrize("method", ["mac_flow", "independent_bc", "matd3bc"])
def test_a_decentralised_policy_uses_only_its_own_observation(method):
    agent = make_learner(MARLConfig(method=method, hidden=(16,)), obs_dim=4, act_dim=2, n_agents=3, seed=0)
    obs = torch.randn(5, 3, 4, generator=_g(0))
    other = obs.clone()
    other[:, 2] += 1.0  # agent 2's observation changes
    a, b = agent.act(obs, generator=_g(1)), agent.act(other, generator=_g(1))
    torch.testing.assert_close(a[:, :2], b[:, :2], rtol=0, atol=0)
    assert not torch.equal(a[:, 2], b[:, 2])
    joint = make_learner(MARLConfig(method="joint_flow", hidden=(16,)), obs_dim=4, act_dim=2, n_agents=3, seed=0)
    assert not torch.equal(joint.act(obs, generator=_g(1))[:, 0], joint.act(other, generator=_g(1))[:, 0])


def test_per_agent_networks_are_permutation_equivariant_with_their_ids():
    """Permuting the agents together with their one-hot ids and noise permutes the actions: the shared networks
    handle every agent's row alone."""
    flow = JointFlowBC(3, 2, 4, (16,), mode="per_agent")
    policy = DecentralisedOneStepPolicy(3, 2, 4, (16,))
    rows = with_agent_ids(torch.randn(6, 4, 3, generator=_g(0)))
    noise = torch.randn(6, 4, 2, generator=_g(1))
    perm = torch.tensor([2, 0, 3, 1])
    with torch.no_grad():
        f, fp = (
            flow.flow.sample(r.flatten(0, 1), noise=n.flatten(0, 1))
            for r, n in ((rows, noise), (rows[:, perm], noise[:, perm]))
        )
        torch.testing.assert_close(fp.reshape(6, 4, 2), f.reshape(6, 4, 2)[:, perm])
        mu = policy.onestep(rows.flatten(0, 1), noise.flatten(0, 1)).reshape(6, 4, 2)
        mu_p = policy.onestep(rows[:, perm].flatten(0, 1), noise[:, perm].flatten(0, 1)).reshape(6, 4, 2)
        torch.testing.assert_close(mu_p, mu[:, perm])


@pytest.mark.parametrize(("mixer", "slope"), [("mean", 1 / 3), ("vdn", 1.0), ("qmix", None)])
def test_mixer_derivatives(mixer, slope):
    critic = FactorisedCritic(4, 2, 3, (16,), mixer=mixer)
    obs = torch.randn(7, 3, 4, generator=_g(0))
    q = torch.randn(2, 7, 3, generator=_g(1), requires_grad=True)
    (grad,) = torch.autograd.grad(critic.mix(q, obs).sum(), q)
    if slope is None:
        assert bool((grad >= 0).all()) and bool((grad > 0).any())  # QMIX: monotone in every Q_i
    else:
        torch.testing.assert_close(grad, torch.full_like(grad, slope))


def test_td_target_bootstraps_from_the_min_over_target_copies_only_where_not_done():
    critic = FactorisedCritic(2, 1, 2, (8,), ensemble=2)
    g = _g(0)
    batch = {
        "obs": torch.randn(6, 2, 2, generator=g),
        "actions": torch.rand(6, 2, 1, generator=g),
        "rewards": torch.randn(6, generator=g),
        "next_obs": torch.randn(6, 2, 2, generator=g),
        "masks": torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0]),
    }
    next_act = torch.rand(6, 2, 1, generator=g)
    loss, _ = td_loss(critic, batch, next_act, 0.9)
    with torch.no_grad():
        y = batch["rewards"] + 0.9 * batch["masks"] * aggregate(
            critic.q_tot(batch["next_obs"], next_act, target=True), "min"
        )
        expected = (critic.q_tot(batch["obs"], batch["actions"]) - y).square().mean(1).sum()
    torch.testing.assert_close(loss, expected)
    assert y[1] == batch["rewards"][1] and y[3] == batch["rewards"][3]


def test_bad_settings_and_inputs_are_refused_by_name():
    for kwargs, match in (
        ({"gamma": 1.0}, "gamma"),
        ({"alpha": -1.0}, "alpha"),
        ({"mixer": "max"}, "mixer"),
        ({"method": "sac"}, "method"),
        ({"ensemble": 0}, "ensemble"),
    ):
        with pytest.raises(ValueError, match=match):
            MARLConfig(**kwargs)
    agent = make_learner(MARLConfig(hidden=(8,)), obs_dim=4, act_dim=2, n_agents=3)
    with pytest.raises(ValueError, match=r"obs: expected shape \(B, 3, 4\)"):
        agent.act(torch.zeros(5, 2, 4))
    with pytest.raises(ValueError, match=r"n_agents: expected a positive int"):
        make_learner(MARLConfig(), obs_dim=4, act_dim=2, n_agents=0)
    with pytest.raises(ValueError, match=r"noise: expected shape"):
        agent.flow.sample(torch.zeros(5, 3, 4), noise=torch.zeros(5, 3, 3))
