"""Flow-matching, Riemannian FM, bridge, denoising-score, DDPM and EDM losses against exact values."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.losses import (
    bridge_loss,
    ddpm_loss,
    denoising_score_loss,
    edm_loss,
    edm_weight,
    flow_matching_loss,
    riemannian_flow_matching_loss,
)
from flowlab.core.manifolds import Sphere
from flowlab.core.paths import AffinePath, PathSample
from flowlab.core.paths.bridge import AugmentedBridgePath, BridgePath
from flowlab.core.schedules import VP, CondOT, DiscreteVP

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _sample(batch: int = 6, seed: int = 0) -> PathSample:
    g = _gen(seed)
    x_0, x_1 = torch.randn(batch, 2, 3, generator=g, dtype=F64), torch.randn(batch, 2, 3, generator=g, dtype=F64)
    return AffinePath(CondOT()).sample(x_0, x_1, torch.rand(batch, generator=g, dtype=F64))


def test_flow_matching_loss_is_zero_at_the_target_and_a_squared_norm_otherwise(device):
    s = _sample()
    s = PathSample(*(v.to(device) for v in (s.x_0, s.x_1, s.t, s.x_t, s.dx_t)))
    assert float(flow_matching_loss(s.dx_t, s)) == 0.0
    offset = torch.arange(6, dtype=F64, device=device).reshape(1, 2, 3) / 10  # ||offset||^2 = 0.55
    per_sample = flow_matching_loss(s.dx_t + offset, s, reduction="none")
    assert per_sample.shape == (6,) and torch.allclose(per_sample, torch.full((6,), 0.55, dtype=F64, device=device))
    w = torch.linspace(0, 1, 6, dtype=F64, device=device)
    assert float(flow_matching_loss(s.dx_t + offset, s, weight=w)) == pytest.approx(0.55 * 0.5)
    assert float(flow_matching_loss(s.dx_t + offset, s, weight=w, reduction="sum")) == pytest.approx(0.55 * 3)
    assert float(flow_matching_loss(s.dx_t + offset, s.dx_t)) == pytest.approx(0.55)  # a plain target tensor


def test_flow_matching_loss_is_minimised_by_the_marginal_velocity():
    """x_0 ~ N(0, 1), x_1 = 2 (a point mass): the marginal CondOT velocity is (2 - x_t)/(1 - t)."""
    n, g = 20_000, _gen(1)
    x_0, x_1 = torch.randn(n, 1, generator=g, dtype=F64), torch.full((n, 1), 2.0, dtype=F64)
    s = AffinePath(CondOT()).sample(x_0, x_1, torch.rand(n, generator=g, dtype=F64) * 0.9)
    marginal = (2 - s.x_t) / (1 - s.t[:, None])
    assert float(flow_matching_loss(marginal, s)) < 1e-20
    assert float(flow_matching_loss(marginal + 0.1, s)) == pytest.approx(0.01, rel=1e-9)


def test_riemannian_loss_uses_the_metric_and_the_tangent_space():
    g, sphere = _gen(2), Sphere(2)
    x_t = torch.nn.functional.normalize(torch.randn(5, 3, generator=g, dtype=F64), dim=1)
    dx_t = sphere.proju(x_t, torch.randn(5, 3, generator=g, dtype=F64))
    s = PathSample(x_0=x_t, x_1=x_t, t=torch.full((5,), 0.5, dtype=F64), x_t=x_t, dx_t=dx_t)
    w = sphere.proju(x_t, torch.randn(5, 3, generator=g, dtype=F64))
    assert float(riemannian_flow_matching_loss(dx_t, s, sphere)) == pytest.approx(0.0, abs=1e-24)
    assert float(riemannian_flow_matching_loss(dx_t + 3.0 * x_t, s, sphere)) == pytest.approx(0.0, abs=1e-24)
    expected = w.square().sum(1)
    assert torch.allclose(riemannian_flow_matching_loss(dx_t + w, s, sphere, reduction="none"), expected)


def test_denoising_score_loss_at_the_exact_score_of_gaussian_data():
    """x_1 ~ N(0, s^2 I) under VP: score = -x / (alpha^2 s^2 + sigma^2) and the expected loss is
    D alpha^2 s^2 / (alpha^2 s^2 + sigma^2) (the residual variance of x_0 given x_t)."""
    n, d, sd, t0 = 20_000, 2, 0.7, 0.6
    path, g = AffinePath(VP()), _gen(3)
    t = torch.full((n,), t0, dtype=F64)
    coef = path.schedule(torch.tensor(t0, dtype=F64))
    var_t = float(coef.alpha**2 * sd**2 + coef.sigma**2)

    def score(*, x, t):
        return -x / var_t

    x_1 = sd * torch.randn(n, d, generator=g, dtype=F64)
    per = denoising_score_loss(score, x_1, t, path, generator=g, reduction="none")
    expected = d * float(coef.alpha**2) * sd**2 / var_t
    assert float(per.mean()) == pytest.approx(expected, abs=5 * float(per.std()) / math.sqrt(n))

    def worse(*, x, t):
        return 1.2 * score(x=x, t=t)

    assert float(denoising_score_loss(worse, x_1, t, path, generator=g)) > expected * 1.01


def test_ddpm_loss_at_the_exact_epsilon_predictor_of_gaussian_data():
    """x ~ N(0, s^2 I): E[eps | x_t] = sigma x_t / (alpha^2 s^2 + sigma^2), whose expected loss is the grid mean of
    the residual variance alpha_k^2 s^2 / (alpha_k^2 s^2 + sigma_k^2); the model sees the grid's times in float64,
    integer timesteps to 1e-9 (float32 times miss them by up to 1e-4 at K = 1000)."""
    n, d, sd = 40_000, 3, 0.5
    schedule = DiscreteVP.linear(50, beta_end=0.2)
    seen = []

    def exact(*, x, t):
        seen.append(t)
        out = schedule(t)
        var = (out.alpha**2 * sd**2 + out.sigma**2)[:, None]
        return (out.sigma[:, None] / var).to(x.dtype) * x

    g = _gen(4)
    x = sd * torch.randn(n, d, generator=g, dtype=F64)
    per = ddpm_loss(exact, x, schedule, generator=g, reduction="none")
    grid = schedule(schedule.time_of(torch.arange(50, dtype=F64)))
    expected = float((grid.alpha**2 * sd**2 / (grid.alpha**2 * sd**2 + grid.sigma**2)).mean())
    assert per.shape == (n,)
    assert float(per.mean()) == pytest.approx(expected, abs=5 * float(per.std()) / math.sqrt(n))
    steps = schedule.timestep_of(seen[0])
    assert seen[0].dtype == F64 and float((steps - steps.round()).abs().max()) < 1e-9
    assert steps.min() >= 0 and steps.max() <= 49
    assert float(ddpm_loss(lambda *, x, t: 0 * x, x, schedule, generator=_gen(5))) == pytest.approx(1.0, abs=0.02)


def test_ddpm_loss_mean_and_weights_agree_with_the_per_sample_losses():
    schedule, x = DiscreteVP.linear(20), torch.randn(8, 2, 4, 4, generator=_gen(6))
    model = torch.nn.Conv2d(2, 2, 1)

    def net(*, x, t):
        return model(x)

    per = ddpm_loss(net, x, schedule, generator=_gen(7), reduction="none")
    mean = ddpm_loss(net, x, schedule, generator=_gen(7))
    w = torch.arange(8.0)
    weighted = ddpm_loss(net, x, schedule, generator=_gen(7), weight=w)
    assert float(mean) == pytest.approx(float(per.mean()), rel=1e-6)
    assert float(weighted) == pytest.approx(float((w * per).mean()), rel=1e-6)
    assert float(ddpm_loss(net, x, schedule, generator=_gen(7), reduction="sum")) == pytest.approx(float(per.sum()))
    with pytest.raises(ValueError, match=r"^schedule:"):
        ddpm_loss(net, x, VP(), generator=_gen(7))
    with pytest.raises(ValueError, match=r"^model:"):
        ddpm_loss(lambda *, x, t: x[:, :1], x, schedule)
    with pytest.raises(ValueError, match=r"^reduction:"):
        ddpm_loss(net, x, schedule, reduction="avg")
    with pytest.raises(ValueError, match=r"^x:"):
        ddpm_loss(net, torch.full((2, 2, 4, 4), math.nan), schedule)


def test_edm_weight_and_loss_on_a_hand_computed_case():
    assert float(edm_weight(torch.tensor(1.0), 0.5)) == pytest.approx(5.0)  # (1 + 1/4) / (1/4)
    assert float(edm_weight(torch.tensor(0.5), 0.5)) == pytest.approx(8.0)  # (1/4 + 1/4) / (1/16)
    seen = {}

    def zero(*, x, sigma):
        seen["sigma"] = sigma
        return torch.zeros_like(x)

    x = torch.ones(2, 4, dtype=F64)
    # P_std = 0 fixes sigma = exp(P_mean) = 1: loss = 5 * ||x||^2 = 20 per sample
    assert float(edm_loss(zero, x, P_mean=0.0, P_std=0.0, sigma_data=0.5, generator=_gen(4))) == pytest.approx(20.0)
    # sigma = exp(P_mean + P_std z) with z the generator's first (B,) draw
    edm_loss(zero, x, P_mean=-1.2, P_std=1.2, generator=_gen(5))
    z = torch.randn(2, generator=_gen(5), dtype=F64)
    assert torch.allclose(seen["sigma"], torch.exp(-1.2 + 1.2 * z))


def test_edm_loss_has_unit_effective_weight_at_the_optimal_denoiser():
    """For x ~ N(0, sd^2 I) the ideal denoiser sd^2/(sigma^2 + sd^2) y leaves posterior variance
    sigma^2 sd^2/(sigma^2 + sd^2) per dimension, which lambda(sigma) cancels: E[loss] = D for every sigma."""
    n, d, sd = 20_000, 3, 0.5
    g = _gen(6)

    def ideal(*, x, sigma):
        return sd**2 / (sigma[:, None] ** 2 + sd**2) * x

    x = sd * torch.randn(n, d, generator=g, dtype=F64)
    per = edm_loss(ideal, x, sigma_data=sd, generator=g, reduction="none")
    assert float(per.mean()) == pytest.approx(d, abs=5 * float(per.std()) / math.sqrt(n))


def test_bridge_loss_is_zero_for_the_exact_drift_and_passes_y():
    g = _gen(7)
    clean, observed = torch.randn(8, 3, generator=g, dtype=F64), torch.randn(8, 3, generator=g, dtype=F64)
    seen = []

    def oracle(*, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append(y)
        return (clean - x) / (1 - t[:, None])  # the bridge's SDE drift toward the clean endpoint

    path = AugmentedBridgePath(0.3, source_noise=0.05)
    assert float(bridge_loss(oracle, clean, observed, path=path, generator=g)) == pytest.approx(0.0, abs=1e-20)
    assert seen[-1] is observed
    # BridgePath's target is the conditional ODE velocity, not the SDE drift: the oracle is then wrong
    assert float(bridge_loss(oracle, clean, observed, path=BridgePath(0.3), generator=g)) > 1e-3


def test_bad_inputs_name_the_argument():
    s = _sample()
    with pytest.raises(ValueError, match=r"^prediction:"):
        flow_matching_loss(s.dx_t[:, :1], s)
    with pytest.raises(ValueError, match=r"^weight:"):
        flow_matching_loss(s.dx_t, s, weight=torch.ones(3, dtype=F64))
    with pytest.raises(ValueError, match=r"^reduction:"):
        flow_matching_loss(s.dx_t, s, reduction="avg")
    with pytest.raises(ValueError, match=r"^sample:"):
        flow_matching_loss(s.dx_t, [s.dx_t])
    with pytest.raises(ValueError, match=r"^manifold:"):
        riemannian_flow_matching_loss(s.dx_t, s, "sphere")
    with pytest.raises(ValueError, match=r"^path:"):
        denoising_score_loss(lambda *, x, t: x, s.x_1, s.t, BridgePath(1.0))
    with pytest.raises(ValueError, match=r"^score:"):
        denoising_score_loss(lambda *, x, t: x[:, :1], s.x_1, s.t, AffinePath(CondOT()))
    with pytest.raises(ValueError, match=r"^P_std:"):
        edm_loss(lambda *, x, sigma: x, s.x_1, P_std=-1.0)
    with pytest.raises(ValueError, match=r"^sigma_data:"):
        edm_loss(lambda *, x, sigma: x, s.x_1, sigma_data=0.0)
    with pytest.raises(ValueError, match=r"^denoiser:"):
        edm_loss(lambda *, x, sigma: x[:1], s.x_1)
