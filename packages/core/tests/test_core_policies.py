"""pi-Flow's network-free velocity policies: closed-form posteriors against exact flows and brute-force integrals."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.flowmaps import DXPolicy, GMPolicy, average_velocity, num_substeps, rollout
from flowlab.core.testing.analytic import GaussianToGaussian

F64 = torch.float64


@pytest.fixture(autouse=True)
def _one_thread():
    """Every tensor here is small: intra-op threads only add contention on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _gaussian_policy(problem_mean: torch.Tensor, c: float, x_src: torch.Tensor, t_src: torch.Tensor) -> GMPolicy:
    """The exact K = 1 policy for data N(m, c I) and source N(0, I): x_1 | x_src is Gaussian with precision
    1/c + t²/σ² and mean (m/c + t x_src / σ²) / precision (σ = 1 - t)."""
    sigma = (1 - t_src)[:, None]
    precision = 1 / c + (t_src[:, None] / sigma) ** 2
    mean = (problem_mean / c + t_src[:, None] * x_src / sigma**2) / precision
    var = 1 / precision  # (B, 1)
    means = ((mean - x_src) / sigma)[:, None]  # core-velocity units: (B, 1, D)
    logstd = (0.5 * torch.log(var) - torch.log(sigma))[:, None]  # (B, 1, 1)
    return GMPolicy(means, logstd, torch.zeros(len(x_src), 1, 1, dtype=F64), x_src, t_src)


def test_gm_policy_with_one_component_is_the_exact_gaussian_velocity():
    m, c = torch.tensor([1.5, -0.5], dtype=F64), 0.3
    problem = GaussianToGaussian(torch.zeros(2, dtype=F64), torch.ones(2, dtype=F64), m, torch.full((2,), c, dtype=F64))
    g = torch.Generator().manual_seed(0)
    t_src = 0.6 * torch.rand(64, generator=g, dtype=F64)
    x_src = problem.sample(t_src, generator=g).x_t
    policy = _gaussian_policy(m, c, x_src, t_src)
    t = t_src + (0.95 - t_src) * torch.rand(64, generator=g, dtype=F64)
    x = x_src + 0.5 * torch.randn(64, 2, generator=g, dtype=F64)  # any state, not only the policy's own path
    torch.testing.assert_close(policy.velocity(x, t), problem.velocity(x, t), atol=1e-10, rtol=1e-10)
    # the rollout follows the exact ODE with first-order Euler error
    t_end = torch.full((64,), 0.9, dtype=F64)
    exact = problem.flow_map(x_src, t_src, t_end)
    errors = [float((rollout(policy, x_src, t_src, t_end, substeps_per_unit=n) - exact).abs().max()) for n in (64, 128)]
    assert errors[1] < 2e-2
    assert 1.7 < errors[0] / errors[1] < 2.3  # O(1 / substeps)


def test_gm_policy_velocity_at_the_source_is_the_mixture_mean():
    g = torch.Generator().manual_seed(1)
    b, k, c, h, w = 3, 4, 2, 2, 3
    means = torch.randn(b, k, c, h, w, generator=g, dtype=F64)
    logstd = torch.randn(b, k, 1, 1, 1, generator=g, dtype=F64)
    logits = torch.randn(b, k, 1, h, w, generator=g, dtype=F64)  # per-pixel mixture weights
    x_src, t_src = torch.randn(b, c, h, w, generator=g, dtype=F64), torch.tensor([0.0, 0.3, 0.7], dtype=F64)
    policy = GMPolicy(means, logstd, logits, x_src, t_src)
    expected = (torch.softmax(logits, dim=1) * means).sum(1)
    torch.testing.assert_close(policy.velocity(x_src, t_src), expected)


def test_gm_posterior_matches_brute_force_integration_in_1d():
    """E[x_1 | x_src, x_t] for a 3-component mixture with unequal variances against a quadrature of
    p_GM(x_1) N(x_t; t x_1, (1-t)²) / N(x_src; t_src x_1, (1-t_src)²)."""
    t_src, t = torch.tensor([0.25], dtype=F64), torch.tensor([0.7], dtype=F64)
    x_src, x_t = torch.tensor([[0.4]], dtype=F64), torch.tensor([[0.9]], dtype=F64)
    means = torch.tensor([[[-1.0], [0.3], [2.0]]], dtype=F64)  # core-velocity units
    logstd = torch.tensor([[[-0.5], [0.2], [-1.0]]], dtype=F64)
    logits = torch.tensor([[[0.1], [-0.4], [0.8]]], dtype=F64)
    policy = GMPolicy(means, logstd, logits, x_src, t_src)

    sig_src = 1 - t_src
    mu = x_src[0, 0] + sig_src * means[0, :, 0]  # data-space components: (3,)
    sd = sig_src * torch.exp(logstd[0, :, 0])
    grid = torch.linspace(-8, 8, 200_001, dtype=F64)
    log_prior = torch.logsumexp(
        torch.log_softmax(logits[0, :, 0], 0)[:, None]
        - 0.5 * ((grid - mu[:, None]) / sd[:, None]) ** 2
        - torch.log(sd[:, None]),
        dim=0,
    )
    log_ratio = -0.5 * ((x_t[0, 0] - t * grid) / (1 - t)) ** 2 + 0.5 * ((x_src[0, 0] - t_src * grid) / sig_src) ** 2
    w = torch.exp(log_prior + log_ratio - (log_prior + log_ratio).max())
    brute = (w * grid).sum() / w.sum()
    torch.testing.assert_close(policy.predict_data(x_t, t)[0, 0], brute, atol=1e-8, rtol=1e-8)


def test_gm_posterior_matches_monte_carlo_over_the_mixture_in_2d():
    """E[x_1 | x_src, x_t] for a 3-component mixture over a 2-channel event (Gaussian over the channels): the
    closed form against self-normalised importance sampling of 400k prior draws, weights the likelihood ratio
    N(x_t; t x_1, (1-t)^2) / N(x_src; t_src x_1, (1-t_src)^2); agreement within 0.01."""
    g = torch.Generator().manual_seed(4)
    means = torch.tensor([[[-1.0, 0.5], [0.4, -0.3], [1.5, 1.0]]], dtype=F64)  # (1, 3, 2), velocity units
    logstd = torch.tensor([[[-0.4], [-0.1], [-0.7]]], dtype=F64)
    logits = torch.tensor([[[0.2], [-0.3], [0.5]]], dtype=F64)
    x_src, t_src = torch.tensor([[0.3, -0.2]], dtype=F64), torch.tensor([0.3], dtype=F64)
    x_t, t = torch.tensor([[0.6, 0.1]], dtype=F64), torch.tensor([0.65], dtype=F64)
    policy = GMPolicy(means, logstd, logits, x_src, t_src)
    mu = x_src + (1 - t_src) * means[0]  # data-space components (3, 2)
    sd = (1 - t_src) * torch.exp(logstd[0])  # (3, 1)
    comp = torch.multinomial(torch.softmax(logits[0, :, 0], 0), 400_000, replacement=True, generator=g)
    x_1 = mu[comp] + sd[comp] * torch.randn(400_000, 2, generator=g, dtype=F64)
    log_w = (-0.5 * ((x_t - t * x_1) / (1 - t)) ** 2 + 0.5 * ((x_src - t_src * x_1) / (1 - t_src)) ** 2).sum(1)
    mc = (torch.softmax(log_w, 0)[:, None] * x_1).sum(0)
    torch.testing.assert_close(policy.predict_data(x_t, t)[0], mc, atol=0.01, rtol=0)


def test_per_pixel_mixtures_are_independent():
    """With logits (B, K, 1, P) the mixture factorises over the P sites: each site alone gives the same answer."""
    g = torch.Generator().manual_seed(2)
    b, k, c, p = 2, 3, 2, 4
    means = torch.randn(b, k, c, p, generator=g, dtype=F64)
    logstd = 0.3 * torch.randn(b, k, 1, 1, generator=g, dtype=F64)
    logits = torch.randn(b, k, 1, p, generator=g, dtype=F64)
    x_src, t_src = torch.randn(b, c, p, generator=g, dtype=F64), torch.tensor([0.1, 0.4], dtype=F64)
    x, t = torch.randn(b, c, p, generator=g, dtype=F64), torch.tensor([0.5, 0.8], dtype=F64)
    full = GMPolicy(means, logstd, logits, x_src, t_src).velocity(x, t)
    for j in range(p):
        site = GMPolicy(means[..., j : j + 1], logstd, logits[..., j : j + 1], x_src[..., j : j + 1], t_src).velocity(
            x[..., j : j + 1], t
        )
        torch.testing.assert_close(full[..., j : j + 1], site)


def test_dx_policy_constant_grid_lands_on_the_data_and_interpolates_linearly():
    g = torch.Generator().manual_seed(3)
    target = torch.randn(5, 3, generator=g, dtype=F64)
    t_grid = torch.linspace(0.2, 1.0, 4, dtype=F64)
    policy = DXPolicy(target[:, None].expand(5, 4, 3), t_grid)
    x_src = torch.randn(5, 3, generator=g, dtype=F64)
    for per_unit in (2, 7, 128):  # Euler is exact on the straight path to a constant data prediction
        out = rollout(policy, x_src, 0.2, 1.0, substeps_per_unit=per_unit)
        torch.testing.assert_close(out, target, atol=1e-12, rtol=0)
    ramp = DXPolicy(
        torch.stack([torch.zeros(5, 3, dtype=F64), torch.ones(5, 3, dtype=F64)], 1), torch.tensor([0.2, 0.6])
    )
    x = torch.zeros(5, 3, dtype=F64)
    torch.testing.assert_close(
        ramp.predict_data(x, torch.full((5,), 0.3, dtype=F64)), torch.full((5, 3), 0.25, dtype=F64)
    )
    torch.testing.assert_close(ramp.predict_data(x, torch.full((5,), 0.9, dtype=F64)), torch.ones(5, 3, dtype=F64))


class _Counting:
    def __init__(self, value: torch.Tensor) -> None:
        self.value, self.calls = value, 0

    def velocity(self, x, t):
        self.calls += 1
        return self.value.expand_as(x)

    def detach(self):
        return self


def test_rollout_substep_count_and_average_velocity_of_a_constant_policy():
    x = torch.zeros(4, 2, dtype=F64)
    c = torch.tensor([0.5, -2.0], dtype=F64)
    policy = _Counting(c)
    rollout(policy, x, 0.1, 0.6)
    assert policy.calls == 64 == num_substeps(0.1, 0.6, 128)
    policy.calls = 0
    rollout(policy, x, 0.5, 0.501)
    assert policy.calls == 1  # at least one sub-step
    t0, t1 = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=F64), torch.tensor([0.2, 0.5, 0.35, 0.9], dtype=F64)
    assert num_substeps(t0, t1, 128) == 64  # the largest gap of the batch
    torch.testing.assert_close(average_velocity(_Counting(c), x, t0, t1), c.expand(4, 2))


def test_gm_dropout_and_detach():
    g = torch.Generator().manual_seed(4)
    b, k = 2000, 4
    means = torch.randn(b, k, 2, generator=g, dtype=F64, requires_grad=True)
    logits = torch.zeros(b, k, 1, dtype=F64)
    x_src, t_src = torch.randn(b, 2, generator=g, dtype=F64), torch.full((b,), 0.3, dtype=F64)
    policy = GMPolicy(means, torch.zeros(b, k, 1, dtype=F64), logits, x_src, t_src)
    assert policy.velocity(x_src, t_src).requires_grad
    assert not policy.detach().velocity(x_src, t_src).requires_grad
    policy.dropout_(0.5, generator=g)
    dropped = torch.isinf(policy.logits[:, :, 0])
    assert not bool(dropped.all(dim=1).any())  # never all components
    # expected dropped fraction: p - p^K / K (a sample that lost all keeps one); binomial 5-sigma bound
    expected = 0.5 - 0.5**k / k
    assert abs(float(dropped.double().mean()) - expected) < 5 * math.sqrt(0.25 / (b * k))
    assert bool(torch.isfinite(policy.velocity(x_src, t_src + 0.2)).all())


def test_policy_bad_inputs_raise_value_errors_naming_the_argument():
    x = torch.zeros(2, 3, dtype=F64)
    t = torch.full((2,), 0.2, dtype=F64)
    means, logstd, logits = torch.zeros(2, 4, 3, dtype=F64), torch.zeros(2, 4, 1, dtype=F64), torch.zeros(2, 4, 1)

    def raises(match, fn, *args, **kwargs):
        with pytest.raises(ValueError, match=match):
            fn(*args, **kwargs)

    raises("means", GMPolicy, means[:, :, :2], logstd, logits, x, t)
    raises("logstd", GMPolicy, means, torch.zeros(2, 4, 2, dtype=F64), logits, x, t)
    raises("logits", GMPolicy, means, logstd, torch.full((2, 4, 1), float("nan")), x, t)
    raises("t_src", GMPolicy, means, logstd, logits, x, torch.ones(2, dtype=F64))
    policy = GMPolicy(means, logstd, logits, x, t)
    raises("^x:", policy.velocity, torch.zeros(2, 4, dtype=F64), t)
    raises("^t:", policy.velocity, x, t[:1])
    raises("^p:", policy.dropout_, 1.0)
    raises("t_grid", DXPolicy, torch.zeros(2, 3, 3), torch.tensor([0.1, 0.1, 0.5]))
    raises("substeps_per_unit", rollout, policy, x, 0.2, 0.5, substeps_per_unit=0)
    raises("t_end", rollout, policy, x, 0.2, 1.5)
    raises("t_end", average_velocity, policy, x, 0.2, 0.2)
    raises("policy", rollout, object(), x, 0.2, 0.5)
