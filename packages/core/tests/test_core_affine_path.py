"""AffinePath: endpoints, velocity vs finite differences, the convert hub, and argument errors."""

from __future__ import annotations

import itertools

import pytest
import torch

from flowlab.core.distributions import (
    StandardNormal,
    multinomial,
    multinomial_counts,
    randint,
    randn,
    sample_times,
)
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import VE, VP, CondOT, Cosine, DiscreteVP
from flowlab.core.typing import Prediction

SCHEDULES = [CondOT(), Cosine(), VP(), VE(0.01, 20.0), DiscreteVP.scaled_linear()]


def _batch(n=64, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(n, d, generator=g, dtype=torch.float64)
    x1 = torch.randn(n, d, generator=g, dtype=torch.float64) * 2 + 1
    return x0, x1


@pytest.mark.parametrize("schedule", [CondOT(), Cosine()], ids=repr)
def test_endpoints(schedule):
    path = AffinePath(schedule)
    x0, x1 = _batch()
    ones = torch.ones(len(x0), dtype=torch.float64)
    assert torch.allclose(path.sample(x0, x1, 0 * ones).x_t, x0, atol=1e-12)
    assert torch.allclose(path.sample(x0, x1, ones).x_t, x1, atol=1e-12)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_velocity_is_time_derivative(schedule):
    path = AffinePath(schedule)
    x0, x1 = _batch()
    t = torch.linspace(0.1031, 0.8977, len(x0), dtype=torch.float64)
    h = 1e-6
    fd = (path.sample(x0, x1, t + h).x_t - path.sample(x0, x1, t - h).x_t) / (2 * h)
    dx = path.sample(x0, x1, t).dx_t
    assert torch.allclose(fd, dx, rtol=1e-5, atol=1e-5 * dx.abs().max())


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
@pytest.mark.parametrize(("source", "target"), list(itertools.permutations(Prediction, 2)))
def test_convert_round_trips(schedule, source, target):
    path = AffinePath(schedule)
    x0, x1 = _batch()
    t = torch.linspace(0.05, 0.95, len(x0), dtype=torch.float64)
    s = path.sample(x0, x1, t)
    sigma = schedule(t).sigma[:, None]
    truth = {
        Prediction.EPSILON: x0,
        Prediction.DATA: x1,
        Prediction.VELOCITY: s.dx_t,
        Prediction.SCORE: -x0 / sigma,
    }
    # conditional quantities are consistent: converting the true source quantity gives the true target one
    got = path.convert(truth[source], x_t=s.x_t, t=t, source=source, target=target)
    assert torch.allclose(got, truth[target], rtol=1e-7, atol=1e-7)
    back = path.convert(got, x_t=s.x_t, t=t, source=target, target=source)
    assert torch.allclose(back, truth[source], rtol=1e-7, atol=1e-7)


def test_every_schedule_gives_the_same_score_on_gaussian_data():
    """Data N(0, s^2 I): at noise level r = sigma/alpha the marginal is N(0, alpha^2 (s^2 + r^2)) for any schedule;
    the exact denoiser E[x_1 | x_t] converted to a score must equal the closed-form score."""
    s2 = 0.7**2
    x = torch.randn(16, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for schedule in (CondOT(), VP(), VE(0.01, 20.0)):
        path = AffinePath(schedule)
        t = torch.full((16,), 0.6, dtype=torch.float64)
        out = schedule(t)
        a, sg = out.alpha[:, None], out.sigma[:, None]
        var = a**2 * s2 + sg**2
        denoised = a * s2 / var * x  # E[x_1 | x_t = x]
        score = path.convert(denoised, x_t=x, t=t, source="data", target="score")
        assert torch.allclose(score, -x / var, rtol=1e-10)


def test_errors_name_the_argument():
    path = AffinePath(CondOT())
    x0, x1 = _batch(8)
    t = torch.rand(8, dtype=torch.float64)
    with pytest.raises(ValueError, match="mismatched batch sizes"):
        path.sample(x0, x1[:4], t)
    with pytest.raises(ValueError, match="t: expected shape"):
        path.sample(x0, x1, torch.tensor(0.5))
    with pytest.raises(ValueError, match=r"t: times must lie in \[0.0, 1.0\]"):
        path.sample(x0, x1, t + 1.5)
    with pytest.raises(ValueError, match="x_0: contains NaN"):
        path.sample(x0 * float("nan"), x1, t)
    with pytest.raises(ValueError, match="prediction: unknown"):
        path.convert(x0, x_t=x1, t=t, source="velocityy", target="data")
    with pytest.raises(ValueError, match="score conversions need a Gaussian source"):
        AffinePath(CondOT(), gaussian_source=False).convert(x0, x_t=x1, t=t, source="velocity", target="score")
    with pytest.raises(ValueError, match="schedule"):
        AffinePath("condot")


def test_per_sample_generators_make_samples_independent_of_batching():
    gens = [torch.Generator().manual_seed(i) for i in range(6)]
    full = randn((6, 3), generator=gens)
    gens = [torch.Generator().manual_seed(i) for i in range(6)]
    part = randn((2, 3), generator=gens[4:])
    assert torch.equal(full[4:], part)
    with pytest.raises(ValueError, match="generator"):
        randn((3, 2), generator=gens[:2])


def test_multinomial_draws_on_the_generators_device_and_returns_on_the_probabilities_device():
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    out = multinomial(probs, 4, replacement=True, generator=torch.Generator().manual_seed(1))
    ref = torch.multinomial(probs, 4, replacement=True, generator=torch.Generator().manual_seed(1))
    assert torch.equal(out, ref) and out.dtype == torch.int64
    assert not bool((out[1] == 1).any())  # a zero-probability category is never drawn (CUDA probs: test_core_gpu)


def test_multinomial_counts_have_the_multinomial_mean_and_covariance_and_sum_to_the_total():
    probs = torch.tensor([[0.1, 0.6, 0.3, 0.0], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    n, total = 40_000, 50
    counts = multinomial_counts(probs.expand(n, -1, -1), total, generator=torch.Generator().manual_seed(0))
    assert counts.shape == (n, 2, 4) and counts.dtype == torch.float64
    assert bool((counts.sum(-1) == total).all()) and bool((counts[:, 0, 3] == 0).all())  # p = 0 is never drawn
    for row, p in zip(counts.unbind(1), probs, strict=True):
        cov = torch.diag(p) - torch.outer(p, p)  # per draw; the counts' covariance is total times it
        se = (total * cov.diagonal() / n).sqrt()
        assert bool(((row.mean(0) - total * p).abs() <= 5 * se + 1e-12).all())  # 5 standard errors
        emp = torch.cov(row.T)
        assert torch.allclose(emp, total * cov, atol=0.05 * total * float(cov.diagonal().max()))  # sd of entries ~1%
    again = multinomial_counts(probs.expand(n, -1, -1), total, generator=torch.Generator().manual_seed(0))
    assert torch.equal(counts, again)
    for bad, match in ((-1, "total"), (2.0, "total"), (True, "total")):
        with pytest.raises(ValueError, match=match):
            multinomial_counts(probs, bad)
    with pytest.raises(ValueError, match="probs"):
        multinomial_counts(torch.tensor([0.5, 0.6]), 3)
    for bad in ([1.5, -0.5], [float("nan"), 1.0], [float("inf"), 0.0]):
        with pytest.raises(ValueError, match="probs"):
            multinomial_counts(torch.tensor(bad), 3)


def test_randint_draws_torch_randint_on_the_generators_device():
    out = randint(7, (5000,), generator=torch.Generator().manual_seed(3), device="meta")
    assert out.device.type == "meta" and out.dtype == torch.int64  # moved after drawing on the CPU generator
    out = randint(7, (5000,), generator=torch.Generator().manual_seed(3))
    assert torch.equal(out, torch.randint(7, (5000,), generator=torch.Generator().manual_seed(3)))
    assert torch.equal(torch.bincount(out, minlength=7) > 600, torch.ones(7, dtype=torch.bool))  # every value, ~714
    assert int(out.min()) == 0 and int(out.max()) == 6
    gens = [torch.Generator().manual_seed(i) for i in range(4)]
    assert torch.equal(
        randint(9, (4, 2), generator=gens)[3], randint(9, (2,), generator=torch.Generator().manual_seed(3))
    )
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="high"):
            randint(bad, (3,))


def test_standard_normal_log_prob_and_time_samplers():
    src = StandardNormal((2,), scale=2.0)
    x = torch.zeros(1, 2, dtype=torch.float64)
    assert float(src.log_prob(x)) == pytest.approx(-torch.log(torch.tensor(2 * torch.pi * 4.0)).item())
    g = torch.Generator().manual_seed(0)
    t = sample_times(20000, dist="logit_normal", generator=g)
    assert float(t.min()) > 0 and float(t.max()) < 1 and abs(float(t.median()) - 0.5) < 0.02
    with pytest.raises(ValueError, match="dist"):
        sample_times(3, dist="beta")
    with pytest.raises(ValueError, match="event shape"):
        src.log_prob(torch.zeros(1, 3))
