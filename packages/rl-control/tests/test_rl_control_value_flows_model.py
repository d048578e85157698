"""Value Flows networks: the return flow's derivative and spread, the BC actor's rejection sampling and FQL's
one-step distillation."""

from __future__ import annotations

import pytest
import torch

from flowlab.rl_control.policies import FlowBCPolicy, OneStepPolicy, rejection_sample
from flowlab.rl_control.value_flows.model import ReturnFlowCritic


@pytest.mark.parametrize("mode", ["jvp", "vjp"])
@pytest.mark.parametrize("clipping", [False, True])
def test_flow_jacobian_matches_finite_differences(mode, clipping):
    """J = d phi_t / d eps for per-sample end times, also where the envelope clip is active (J = 0 there)."""
    torch.manual_seed(0)
    v_range, bound = ((-0.3, 0.3), 0.6) if clipping else ((-50.0, 50.0), 5.0)
    critic = ReturnFlowCritic(3, 1, (32, 32), n_critics=2, v_range=v_range, jacobian_mode=mode, noise_bound=bound)
    critic = critic.double()
    n = 40
    obs, act = torch.randn(n, 3, dtype=torch.float64), torch.randn(n, 1, dtype=torch.float64)
    eps = torch.randn(n, dtype=torch.float64)
    end_t = 0.2 + 0.8 * torch.rand(n, dtype=torch.float64)
    out = critic.returns(eps, obs, act, end_t=end_t, with_jacobian=True)
    h = 1e-6
    fd = (critic.returns(eps + h, obs, act, end_t=end_t).z - critic.returns(eps - h, obs, act, end_t=end_t).z) / (2 * h)
    torch.testing.assert_close(out.jacobian, fd, rtol=1e-4, atol=1e-6)
    assert torch.allclose(out.z, critic.returns(eps, obs, act, end_t=end_t).z)
    if clipping:  # some flows end on the envelope at their own end time (not at t = 1), with J = 0
        lo, hi = 0.3 * end_t * -1 - (1 - end_t) * 0.6, 0.3 * end_t + (1 - end_t) * 0.6
        on_bound = torch.isclose(out.z, lo.expand_as(out.z)) | torch.isclose(out.z, hi.expand_as(out.z))
        assert on_bound.any() and (out.jacobian[on_bound] == 0).all()
        assert (out.z >= lo - 1e-12).all() and (out.z <= hi + 1e-12).all()


def test_spread_reductions_follow_jensen_and_reject_unknown_names():
    """Over the same eps draws, sqrt(E[J^2]) >= E|J| > 0 for every (s, a); the one-eps value is one of the draws."""
    torch.manual_seed(0)
    critic = ReturnFlowCritic(3, 1, (16,), n_critics=2, v_range=(-5.0, 5.0))
    obs, act = torch.randn(6, 3), torch.randn(6, 1)
    kw = {"n_eps": 32, "target": False}
    mean = critic.spread(obs, act, generator=torch.Generator().manual_seed(1), **kw)
    rms = critic.spread(obs, act, generator=torch.Generator().manual_seed(1), reduce="rms", **kw)
    assert (mean > 0).all() and (rms >= mean - 1e-6).all() and (rms > mean).any()
    with pytest.raises(ValueError, match="reduce"):
        critic.spread(obs, act, generator=torch.Generator(), reduce="median")


def test_rejection_sampling_returns_the_argmax_and_is_deterministic():
    policy = FlowBCPolicy(2, 1, (16,))
    obs = torch.randn(3, 2)

    def q_fn(o, a):
        return -(a[:, 0] - 0.2).abs()

    a1 = rejection_sample(policy, q_fn, obs, num_samples=8, generator=torch.Generator().manual_seed(5))
    a2 = rejection_sample(policy, q_fn, obs, num_samples=8, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(a1, a2)
    cand = policy.sample(obs.repeat_interleave(8, 0), generator=torch.Generator().manual_seed(5)).reshape(3, 8)
    best = cand.gather(1, (cand - 0.2).abs().argmin(1, keepdim=True))
    torch.testing.assert_close(a1, best)


def test_onestep_distillation_matches_the_bc_flow_when_q_is_flat():
    """With a constant Q the one-step loss is alpha ||mu(s, eps) - phi_BC(s, eps)||^2 alone: training it makes the
    one-step map reproduce the BC flow's action from the same noise."""
    torch.manual_seed(0)
    bc, mu = FlowBCPolicy(2, 1, (32, 32)), OneStepPolicy(2, 1, (64, 64))
    opt = torch.optim.Adam(mu.parameters(), 3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(400):
        obs = torch.randn(128, 2, generator=g)
        loss = mu.loss(obs, lambda o, a: torch.zeros(len(o)), bc, alpha=1.0, normalize_q=False, generator=g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    obs, noise = torch.randn(500, 2, generator=g), torch.randn(500, 1, generator=g)
    with torch.no_grad():
        err = (mu(obs, noise) - bc.sample(obs, noise=noise)).abs().mean()
        spread = bc.sample(obs, noise=noise).std()
    assert err < 0.2 * spread, (float(err), float(spread))
