"""Value Flows on CUDA (skipped without a CUDA device): an agent trained on the GPU, then its return samples, spread
and actions against the same networks on the CPU. One CPU generator drives either device with the same noise."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from flowlab.rl_control.value_flows import AgentConfig, collect, make_agent, train_agent


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.gpu
def test_value_flows_trains_on_cuda_and_samples_returns_and_acts_as_on_the_cpu():
    cuda = torch.device("cuda")
    data = collect("Pendulum-v1", "medium", 1000, seed=0)
    scale = data.reward_scale()
    r = data.rewards / scale
    config = AgentConfig(method="value_flows", hidden=(64, 64), lr=1e-3, gamma=0.97, num_action_samples=8)
    agent = make_agent(
        config, obs_dim=data.obs_dim, act_dim=data.act_dim, reward_range=(float(r.min()), float(r.max())), seed=0
    )
    fitted = train_agent(
        agent, data, steps=50, batch_size=64, reward_scale=scale, generator=_g(0), device=cuda, log_every=10
    )
    assert all(math.isfinite(float(h["loss"])) for h in fitted.history)
    assert next(agent.parameters()).device.type == "cuda"
    on_cpu = copy.deepcopy(agent).cpu()
    obs, act = torch.as_tensor(data.observations[:32]), torch.as_tensor(data.actions[:32])
    with torch.no_grad():
        z = agent.sample_returns(obs.to(cuda), act.to(cuda), 64, generator=_g(1))
        z_cpu = on_cpu.sample_returns(obs, act, 64, generator=_g(1))
        spread = agent.spread(obs.to(cuda), act.to(cuda), generator=_g(2), n_eps=16, reduce="rms")
        spread_cpu = on_cpu.spread(obs, act, generator=_g(2), n_eps=16, reduce="rms")
        actions = agent.act(obs.to(cuda), generator=_g(3))
    assert z.shape == (32, 64) and z.device.type == "cuda" and torch.isfinite(z).all()
    lo, hi = agent.return_range
    assert bool(((z >= lo) & (z <= hi)).all())
    # float32, 10 clipped Euler steps of the same field from the same noise: the devices differ by round-off only
    torch.testing.assert_close(z.cpu(), z_cpu, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(spread.cpu(), spread_cpu, atol=1e-3, rtol=1e-3)
    assert actions.shape == (32, data.act_dim) and bool((actions.abs() <= 1).all())


@pytest.mark.gpu
def test_mac_flow_and_diffusion_bc_train_on_cuda_and_act_as_on_the_cpu():
    from flowlab.rl_control.envs.coordination import game_dataset
    from flowlab.rl_control.mac_flow import MARLConfig, make_learner, train_marl

    cuda = torch.device("cuda")
    data = game_dataset("matrix", 500, seed=0)
    for method in ("mac_flow", "diffusion_bc"):
        agent = make_learner(MARLConfig(method=method, hidden=(32, 32)), obs_dim=1, act_dim=2, n_agents=2, seed=0)
        results = train_marl(agent, data, steps=20, batch_size=64, generator=_g(0), device=cuda, log_every=10)
        assert all(math.isfinite(r.logs["loss"]) for r in results.values())
        assert next(agent.parameters()).device.type == "cuda"
        on_cpu = copy.deepcopy(agent).cpu()
        obs = torch.zeros(16, 2, 1)
        actions = agent.act(obs.to(cuda), generator=_g(3))
        assert actions.device.type == "cuda" and bool((actions.abs() <= 1).all())
        # one CPU generator drives both devices with the same noise: round-off only
        torch.testing.assert_close(actions.cpu(), on_cpu.act(obs, generator=_g(3)), atol=1e-3, rtol=1e-3)
