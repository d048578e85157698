"""MAC-Flow's measurements: W2 to the product of marginals against the Gaussian closed form, the value-gap bound and
the finite-difference Lipschitz constant, and the latency harness's network-call counts."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.rl_control.envs.coordination import product_of_marginals
from flowlab.rl_control.mac_flow import MARLConfig, make_learner
from flowlab.rl_control.mac_flow.evaluate import joint_w2, lipschitz_estimate, measure_latency, product_w2, value_gap


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_w2_between_a_perfectly_correlated_gaussian_and_its_product_matches_the_closed_form():
    """x_1 = x_2 ~ N(0, 1) against independent N(0, 1)s: W2^2 = tr(S) + 2 - 2 tr(S^1/2) = 4 - 2 sqrt(2) for
    S = [[1, 1], [1, 1]], so W2 = 1.0824. 2000 samples each through ot.emd2: the empirical W2 of two samples of one
    law is about 0.1 here (measured), the tolerance."""
    x = torch.randn(2000, 1, 1, generator=_g(0), dtype=torch.float64)
    joint = torch.cat([x, x], 1)
    assert product_w2(joint, generator=_g(1)) == pytest.approx(math.sqrt(4 - 2 * math.sqrt(2)), abs=0.1)
    # a product law against its own product: only the sampling floor remains
    indep = torch.randn(2000, 2, 1, generator=_g(2), dtype=torch.float64)
    assert product_w2(indep, generator=_g(3)) < 0.15
    assert joint_w2(indep, indep) == pytest.approx(0.0, abs=1e-6)


def test_lipschitz_estimate_and_the_value_gap_bound():
    w = torch.tensor([[0.3, -0.4], [1.2, 0.0]], dtype=torch.float64)  # a linear payoff: ||grad|| = ||w|| = 1.3

    def payoff(a: torch.Tensor) -> torch.Tensor:
        return (a * w).sum((1, 2))

    lq = lipschitz_estimate(payoff, (2, 2), generator=_g(0), n_points=500)
    assert lq == pytest.approx(1.3, rel=1e-6)
    joint = torch.randn(500, 2, 2, generator=_g(1), dtype=torch.float64)
    fact = product_of_marginals(joint, generator=_g(2)) + 0.3
    gap = value_gap(payoff, joint, fact, lq)
    assert gap.holds and 0 < gap.gap <= gap.lipschitz * gap.w2
    assert gap.gap == pytest.approx(abs(float(payoff(joint).mean() - payoff(fact).mean())))


@pytest.mark.parametrize(
    ("method", "calls"), [("mac_flow", 1), ("joint_flow", 10), ("diffusion_bc", 50), ("gaussian_bc", 1), ("matd3bc", 1)]
)
def test_latency_harness_counts_network_calls(method, calls):
    agent = make_learner(MARLConfig(method=method, hidden=(8,)), obs_dim=3, act_dim=2, n_agents=2, seed=0)
    lat = measure_latency(agent, torch.zeros(4, 2, 3), repeats=3, warmup=1)
    assert lat.network_calls == calls and lat.batch == 4 and lat.ms > 0
