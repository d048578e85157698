"""The analytic test kit: every closed form is checked against an independent truth (autograd, the continuity
equation, torch.distributions, sampling), not against itself."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical, MixtureSameFamily, MultivariateNormal

from flowlab.core.paths.affine import AffinePath
from flowlab.core.schedules import VP, CondOT, Cosine, Polynomial
from flowlab.core.testing.analytic import GaussianMixture, GaussianToGaussian
from flowlab.core.testing.asserts import assert_convergence_order, assert_moments_close, empirical_order

F64 = torch.float64
SCHEDULES = [CondOT(), Cosine(), VP(), Polynomial(2.0)]


def _mixture(schedule, *, full: bool = True) -> GaussianMixture:
    means = torch.tensor([[1.0, -0.5, 0.3], [-1.5, 1.0, 0.0], [0.2, 2.0, -1.0]], dtype=F64)
    if full:
        a = torch.tensor([[[0.6, 0.2, 0.0], [0.1, 0.5, 0.1], [0.0, 0.3, 0.4]]], dtype=F64).expand(3, 3, 3)
        covs = a @ a.transpose(-1, -2) + torch.tensor([0.05, 0.2, 0.1], dtype=F64)[:, None, None] * torch.eye(3)
    else:
        covs = torch.tensor([[0.3, 0.5, 0.2], [0.1, 0.1, 0.4], [0.6, 0.2, 0.3]], dtype=F64)
    return GaussianMixture(torch.tensor([0.5, 0.3, 0.2], dtype=F64), means, covs, schedule)


def _g2g(schedule, *, commuting: bool) -> GaussianToGaussian:
    cov_0 = (
        torch.tensor([0.5, 1.5, 1.0], dtype=F64)
        if commuting
        else torch.tensor([[1.0, 0.3, 0], [0.3, 0.7, 0], [0, 0, 2]], dtype=F64)
    )
    cov_1 = (
        torch.tensor([2.0, 0.3, 0.8], dtype=F64)
        if commuting
        else torch.tensor([[0.5, -0.2, 0.1], [-0.2, 1.2, 0], [0.1, 0, 0.3]], dtype=F64)
    )
    mu_0, mu_1 = torch.tensor([0.5, 0.0, -1.0], dtype=F64), torch.tensor([2.0, -1.0, 0.5], dtype=F64)
    return GaussianToGaussian(mu_0, cov_0, mu_1, cov_1, schedule)


def _points(n: int = 16, dim: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = 1.5 * torch.randn(n, dim, generator=g, dtype=F64)
    t = torch.rand(n, generator=g, dtype=F64) * 0.9 + 0.05
    return x, t


def _grad_log_prob(log_prob, x, t):
    x = x.clone().requires_grad_(True)
    return torch.autograd.grad(log_prob(x, t).sum(), x)[0]


def _batch_jacobian(f, x):
    """Per-sample Jacobians (B, D_out, D_in) of a map whose sample b depends only on x[b] (one backward pass
    per output coordinate)."""
    x = x.clone().requires_grad_(True)
    y = f(x)
    rows = [torch.autograd.grad(y[:, i].sum(), x, retain_graph=True)[0] for i in range(y.shape[1])]
    return torch.stack(rows, 1)


def _continuity_residual(log_prob, velocity, x, t):
    """d/dt log p + div u + u . grad log p: zero exactly when u transports p_t (the continuity equation)."""
    x = x.clone().requires_grad_(True)
    t = t.clone().requires_grad_(True)
    dlogp_dt = torch.autograd.grad(log_prob(x, t).sum(), t)[0]
    score = _grad_log_prob(log_prob, x.detach(), t.detach())
    u = velocity(x, t.detach())
    div = sum(torch.autograd.grad(u[:, i].sum(), x, retain_graph=True)[0][:, i] for i in range(x.shape[1]))
    return dlogp_dt + div + (u * score).sum(-1)


# ---------------------------------------------------------------- Gaussian mixture


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
@pytest.mark.parametrize("full", [True, False], ids=["full", "diag"])
def test_mixture_score_is_gradient_of_log_prob(schedule, full):
    gm = _mixture(schedule, full=full)
    x, t = _points()
    torch.testing.assert_close(gm.score(x, t), _grad_log_prob(gm.log_prob, x, t), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_mixture_velocity_and_posterior_match_convert_of_score(schedule):
    gm = _mixture(schedule)
    path = AffinePath(schedule)
    x, t = _points()
    score = gm.score(x, t)
    v = path.convert(score, x_t=x, t=t, source="score", target="velocity")
    data = path.convert(score, x_t=x, t=t, source="score", target="data")
    torch.testing.assert_close(gm.velocity(x, t), v, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(gm.posterior_mean(x, t), data, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("schedule", [CondOT(), Cosine()], ids=repr)
def test_mixture_velocity_solves_continuity_equation(schedule):
    gm = _mixture(schedule)
    x, t = _points()
    res = _continuity_residual(gm.log_prob, gm.velocity, x, t)
    torch.testing.assert_close(res, torch.zeros_like(res), atol=1e-9, rtol=0)


def test_mixture_log_prob_matches_torch_distributions_at_both_ends():
    gm = _mixture(CondOT())
    x, _ = _points()
    one, zero = torch.ones(len(x), dtype=F64), torch.zeros(len(x), dtype=F64)
    data = MixtureSameFamily(Categorical(probs=gm.weights), MultivariateNormal(gm.means, gm.covs))
    torch.testing.assert_close(gm.log_prob(x, one), data.log_prob(x))
    source = MultivariateNormal(torch.zeros(3, dtype=F64), torch.eye(3, dtype=F64))
    torch.testing.assert_close(gm.log_prob(x, zero), source.log_prob(x))


def test_mixture_endpoints_are_finite_and_posterior_mean_is_exact():
    gm = _mixture(CondOT())
    x, _ = _points()
    one, zero = torch.ones(len(x), dtype=F64), torch.zeros(len(x), dtype=F64)
    for t in (zero, one):
        for f in (gm.log_prob, gm.score, gm.velocity, gm.posterior_mean):
            assert bool(torch.isfinite(f(x, t)).all())
    # Knowing x_1 exactly (t=1) the posterior mean is x; knowing nothing (t=0) it is the data mean.
    torch.testing.assert_close(gm.posterior_mean(x, one), x)
    torch.testing.assert_close(gm.posterior_mean(x, zero), (gm.weights @ gm.means).expand_as(x))


def test_mixture_with_one_component_equals_gaussian_to_gaussian():
    schedule = Cosine()
    mean, cov = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([[1.0, 0.4], [0.4, 0.5]], dtype=F64)
    gm = GaussianMixture(torch.ones(1, dtype=F64), mean[None], cov[None], schedule)
    g2g = GaussianToGaussian(torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64), mean, cov, schedule)
    x, t = _points(dim=2)
    torch.testing.assert_close(gm.log_prob(x, t), g2g.log_prob(x, t))
    torch.testing.assert_close(gm.velocity(x, t), g2g.velocity(x, t))
    torch.testing.assert_close(gm.mean(t), g2g.mean(t))
    torch.testing.assert_close(gm.cov(t), g2g.cov(t))


def test_mixture_samples_match_its_moments():
    gm = _mixture(CondOT())
    x = gm.sample_data(20_000, generator=torch.Generator().manual_seed(1))
    one = torch.ones(1, dtype=F64)
    assert_moments_close(x, gm.mean(one)[0], gm.cov(one)[0])
    sample = gm.sample(torch.full((20_000,), 0.4, dtype=F64), generator=torch.Generator().manual_seed(2))
    t = torch.full((1,), 0.4, dtype=F64)
    assert_moments_close(sample.x_t, gm.mean(t)[0], gm.cov(t)[0])


def test_ring_mixture_geometry():
    gm = GaussianMixture.ring(8, radius=3.0, std=0.25, dtype=F64)
    torch.testing.assert_close(gm.means.norm(dim=-1), torch.full((8,), 3.0, dtype=F64))
    torch.testing.assert_close(gm.weights, torch.full((8,), 1 / 8, dtype=F64))
    torch.testing.assert_close(gm.covs, 0.0625 * torch.eye(2, dtype=F64).expand(8, 2, 2))
    assert gm.dim == 2 and gm.num_components == 8


def test_parameters_follow_input_dtype_and_survive_inference_mode():
    gm = GaussianMixture.ring(4)  # float32 parameters
    x, t = _points(dim=2)
    with torch.inference_mode():
        gm.velocity(x, t)  # float64 copy made under inference mode
    x = x.requires_grad_(True)
    v = gm.velocity(x, t)
    assert v.dtype == F64
    v.sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


# ---------------------------------------------------------------- Gaussian to Gaussian


@pytest.mark.parametrize("commuting", [True, False], ids=["commuting", "general"])
@pytest.mark.parametrize("schedule", [CondOT(), VP()], ids=repr)
def test_g2g_velocity_solves_continuity_equation(commuting, schedule):
    g2g = _g2g(schedule, commuting=commuting)
    assert g2g.commuting is commuting
    x, t = _points()
    res = _continuity_residual(g2g.log_prob, g2g.velocity, x, t)
    torch.testing.assert_close(res, torch.zeros_like(res), atol=1e-9, rtol=0)


@pytest.mark.parametrize("commuting", [True, False], ids=["commuting", "general"])
def test_g2g_log_prob_matches_torch_distributions(commuting):
    g2g = _g2g(Cosine(), commuting=commuting)
    x, t = _points()
    # Moments of x_t = alpha x_1 + sigma x_0 built directly from the definition.
    s = Cosine()(t[:, None])
    mean = s.alpha * g2g.mu_1 + s.sigma * g2g.mu_0
    cov = s.alpha[..., None] ** 2 * g2g.cov_1 + s.sigma[..., None] ** 2 * g2g.cov_0
    torch.testing.assert_close(g2g.log_prob(x, t), MultivariateNormal(mean, cov).log_prob(x))


def test_g2g_samples_match_marginal_moments():
    g2g = _g2g(CondOT(), commuting=False)
    t = torch.full((20_000,), 0.3, dtype=F64)
    sample = g2g.sample(t, generator=torch.Generator().manual_seed(3))
    assert_moments_close(sample.x_t, g2g.mean(t[:1])[0], g2g.cov(t[:1])[0])
    assert_moments_close(sample.x_0, g2g.mu_0, g2g.cov_0)
    assert_moments_close(sample.x_1, g2g.mu_1, g2g.cov_1)


def test_g2g_commuting_detection_on_full_matrices():
    rot = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=F64))[0]
    c0 = rot @ torch.diag(torch.tensor([1.0, 1.0, 2.0], dtype=F64)) @ rot.T  # repeated eigenvalue
    c1 = rot @ torch.diag(torch.tensor([0.5, 3.0, 0.7], dtype=F64)) @ rot.T
    g2g = GaussianToGaussian(torch.zeros(3, dtype=F64), c0, torch.ones(3, dtype=F64), c1)
    assert g2g.commuting
    x, t = _points()
    res = _continuity_residual(g2g.log_prob, g2g.velocity, x, t)
    torch.testing.assert_close(res, torch.zeros_like(res), atol=1e-9, rtol=0)
    s = torch.zeros_like(t)
    # The flow map pushes N(m_0, C_0) forward to N(m_t, C_t): log p_t(X(x)) = log p_0(x) - log |det dX/dx|.
    y = g2g.flow_map(x, s, t)
    jac = _batch_jacobian(lambda xx: g2g.flow_map(xx, s, t), x)
    torch.testing.assert_close(g2g.log_prob(y, t), g2g.log_prob(x, s) - torch.linalg.slogdet(jac)[1])


def test_g2g_flow_map_is_the_flow_of_its_velocity():
    g2g = _g2g(VP(), commuting=True)
    x, t = _points()
    s = t * 0.5
    torch.testing.assert_close(g2g.flow_map(x, t, t), x)  # X_{t,t} = Id
    u = s + 0.3 * (t - s)
    composed = g2g.flow_map(g2g.flow_map(x, s, u), u, t)
    torch.testing.assert_close(composed, g2g.flow_map(x, s, t))
    # d/dt X_{s,t}(x) = u_t(X_{s,t}(x)), checked by a forward-mode derivative in t.
    y = g2g.flow_map(x, s, t)
    dy_dt = _batch_jacobian(lambda tt: g2g.flow_map(x, s, tt[:, 0]), t[:, None])[..., 0]
    torch.testing.assert_close(dy_dt, g2g.velocity(y, t))


def test_g2g_flow_map_refuses_non_commuting_covariances():
    g2g = _g2g(CondOT(), commuting=False)
    x, t = _points()
    with pytest.raises(ValueError, match="cov_0, cov_1"):
        g2g.flow_map(x, t * 0, t)


# ---------------------------------------------------------------- bad inputs


def test_bad_inputs_name_the_argument():
    means = torch.zeros(2, 2)
    with pytest.raises(ValueError, match="weights"):
        GaussianMixture(torch.tensor([0.7, 0.7]), means, torch.ones(2, 2))
    with pytest.raises(ValueError, match="covs"):
        GaussianMixture(torch.tensor([0.5, 0.5]), means, -torch.ones(2, 2))
    with pytest.raises(ValueError, match="covs"):
        GaussianMixture(torch.tensor([0.5, 0.5]), means, torch.ones(3, 2))
    with pytest.raises(ValueError, match="mu_0, mu_1"):
        GaussianToGaussian(torch.zeros(2), torch.ones(2), torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="cov_1"):
        GaussianToGaussian(torch.zeros(2), torch.ones(2), torch.zeros(2), torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    gm = GaussianMixture.ring(8)
    with pytest.raises(ValueError, match="x"):
        gm.score(torch.zeros(4, 3), torch.zeros(4))
    with pytest.raises(ValueError, match="t"):
        gm.score(torch.zeros(4, 2), torch.zeros(()))


# ---------------------------------------------------------------- asserts


def test_empirical_order_recovers_known_slopes():
    h = torch.tensor([0.1, 0.05, 0.025, 0.0125])
    assert math.isclose(empirical_order(3.0 * h**2, h), 2.0, rel_tol=1e-9)
    assert math.isclose(empirical_order(0.5 * h**4, nfe=4 / h), 4.0, rel_tol=1e-9)
    assert_convergence_order(h * (1 + 0.05 * torch.tensor([1, -1, 1, -1])), h, 1, tol=0.1)
    with pytest.raises(AssertionError, match="convergence order"):
        assert_convergence_order(h**2, h, 1, tol=0.25)
    with pytest.raises(ValueError, match="errors"):
        empirical_order([1.0, 0.0], [0.1, 0.05])


def test_assert_moments_close_detects_a_shift():
    x = torch.randn(10_000, 2, generator=torch.Generator().manual_seed(0), dtype=F64)
    assert_moments_close(x, torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    with pytest.raises(AssertionError, match="mean"):
        assert_moments_close(x + 0.1, torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
    with pytest.raises(AssertionError, match="covariance"):
        assert_moments_close(1.1 * x, torch.zeros(2, dtype=F64), torch.eye(2, dtype=F64))
