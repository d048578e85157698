"""Schedules: endpoint values, analytic derivatives vs finite differences, snr_inverse, grids."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flowlab.core import grids
from flowlab.core.paths.discrete import LinearSigmaKappa, LogLinearKappa
from flowlab.core.schedules import EDM, VE, VP, CondOT, Cosine, DiscreteVP, Polynomial

SCHEDULES = {
    "condot": CondOT(),
    "poly2": Polynomial(2.0),
    "cosine": Cosine(),
    "vp": VP(),
    "ve": VE(0.01, 50.0),
    "edm": EDM(),
    "score_sde_ve": VE.score_sde(25.0),
    "ddpm_linear": DiscreteVP.linear(),
    "sd_scaled_linear": DiscreteVP.scaled_linear(),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_derivatives_match_central_differences(name):
    sch = SCHEDULES[name]
    # avoid DiscreteVP's grid kinks: evaluate between grid points
    t = (torch.linspace(51, 948, 17, dtype=torch.float64).round() + 0.37) / 1000
    h = 1e-6
    out, up, down = sch(t), sch(t + h), sch(t - h)
    fd_alpha = (up.alpha - down.alpha) / (2 * h)
    fd_sigma = (up.sigma - down.sigma) / (2 * h)
    scale_a = out.d_alpha.abs().max().clamp_min(1.0)
    scale_s = out.d_sigma.abs().max().clamp_min(1.0)
    assert torch.allclose(fd_alpha, out.d_alpha, atol=1e-6 * scale_a, rtol=1e-5)
    assert torch.allclose(fd_sigma, out.d_sigma, atol=1e-6 * scale_s, rtol=1e-5)


@pytest.mark.parametrize("name", SCHEDULES)
@settings(max_examples=40, deadline=None)
@given(t=st.floats(0.02, 0.98))
def test_snr_inverse_inverts_snr(name, t):
    sch = SCHEDULES[name]
    tt = torch.tensor([t], dtype=torch.float64)
    assert float(sch.snr_inverse(sch.snr(tt))) == pytest.approx(t, abs=1e-9)


def test_endpoint_values():
    zero, one = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    for sch in (CondOT(), Polynomial(3.0), Cosine()):
        assert float(sch(zero).alpha) == pytest.approx(0, abs=1e-12) and float(sch(zero).sigma) == pytest.approx(1)
        assert float(sch(one).alpha) == pytest.approx(1) and float(sch(one).sigma) == pytest.approx(0, abs=1e-12)
    vp = VP()
    assert float(vp(one).alpha) == 1 and float(vp(one).sigma) == 0
    # at tau = 1 the VP alpha is exp(-(beta_min + (beta_max - beta_min)/2)/2)
    assert float(vp(zero).alpha) == pytest.approx(math.exp(-0.5 * (0.1 + 0.5 * 19.9)))
    ve = VE(0.01, 50.0)
    assert float(ve(zero).sigma) == pytest.approx(50.0) and float(ve(one).sigma) == pytest.approx(0.01)
    assert ve.prior_std == pytest.approx(50.0)
    assert float(VE.score_sde(25.0)(one).sigma) == 0.0


@pytest.mark.parametrize("name", ["condot", "cosine", "vp", "sd_scaled_linear"])
def test_variance_preserving_schedules_keep_unit_variance(name):
    sch = SCHEDULES[name]
    t = torch.linspace(0, 1, 11, dtype=torch.float64)
    out = sch(t)
    if name in ("cosine", "vp", "sd_scaled_linear"):
        assert torch.allclose(out.alpha**2 + out.sigma**2, torch.ones_like(t), atol=1e-9)
    else:
        assert torch.allclose(out.alpha + out.sigma, torch.ones_like(t))


def test_edm_uniform_grid_gives_karras_sigmas():
    n, lo, hi, rho = 18, 0.002, 80.0, 7.0
    i = torch.arange(n, dtype=torch.float64)
    expected = (hi ** (1 / rho) + i / (n - 1) * (lo ** (1 / rho) - hi ** (1 / rho))) ** rho
    got = EDM(lo, hi, rho)(grids.uniform(n - 1, dtype=torch.float64)).sigma
    assert torch.allclose(got, expected, rtol=1e-12)
    # the same noise levels through another schedule's times
    vp_t = grids.karras(n - 1, VP(), sigma_min=lo, sigma_max=hi, dtype=torch.float64)
    out = VP()(vp_t)
    assert torch.allclose(out.sigma / out.alpha, expected, rtol=1e-7)


def test_discrete_vp_hits_its_grid_points():
    sch = DiscreteVP.linear()
    k = torch.tensor([0, 10, 500, 999])
    t = sch.time_of(k.to(torch.float64))
    assert torch.allclose(sch(t).alpha ** 2, sch.alphas_cumprod[k], rtol=1e-12)
    assert torch.allclose(sch.timestep_of(t), k.to(torch.float64))


@pytest.mark.parametrize(("steps", "expected"), [(10, [999, 899, 799, 699, 599, 499, 399, 299, 199, 99, 0]),
                                                 (3, [999, 666, 332, 0])])  # fmt: skip
def test_trailing_grid_visits_diffusers_trailing_timesteps_then_zero(steps, expected):
    """diffusers' trailing spacing: round(K - i K / n) - 1 for i < n (K = 1000), then timestep 0 at t = 1 - 1/K."""
    sch = DiscreteVP.linear()
    g = grids.trailing(sch, steps)
    assert g.dtype == torch.float64 and g.shape == (steps + 1,) and bool((g[1:] > g[:-1]).all())
    assert torch.allclose(sch.timestep_of(g), torch.tensor(expected, dtype=torch.float64), atol=1e-9)
    assert g[-1] == pytest.approx(1 - 1 / 1000, abs=1e-15)
    with pytest.raises(ValueError, match=r"^steps:"):
        grids.trailing(sch, 1000)
    with pytest.raises(ValueError, match=r"^schedule:"):
        grids.trailing(VP(), 10)


def test_logsnr_grid_is_uniform_in_lambda():
    sch = VP()
    g = grids.logsnr_uniform(10, sch, t_start=0.02, t_end=0.98, dtype=torch.float64)
    lam = sch.log_snr(g)
    steps = lam[1:] - lam[:-1]
    assert torch.allclose(steps, steps.mean().expand_as(steps), rtol=1e-8)
    assert g[0] == pytest.approx(0.02) and g[-1] == pytest.approx(0.98)
    with pytest.raises(ValueError, match="t_start, t_end"):
        grids.logsnr_uniform(10, CondOT())  # infinite log-SNR at t=0 and t=1


def test_shifted_grid_keeps_endpoints_and_spends_steps_near_noise():
    g = grids.shifted(10, 3.0, dtype=torch.float64)
    assert g[0] == 0 and g[-1] == 1 and bool((g[1:] > g[:-1]).all())
    assert g[5] < 0.5  # more of the grid near the source for shift > 1


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: VP(5.0, 1.0), "beta_min"),
        (lambda: VE(1.0, 0.5), "sigma_min"),
        (lambda: EDM(rho=0), "rho"),
        (lambda: Polynomial(0), "n"),
        (lambda: DiscreteVP(torch.tensor([0.5, 0.9])), "alphas_cumprod"),
        (lambda: VE.score_sde(0.5), "sigma"),
        (lambda: grids.uniform(0), "n"),
    ],
)
def test_bad_parameters_raise_naming_the_argument(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


# ------------------------------------------------------------------------------------------------- alpha_inverse

UNIT_ALPHA = ("ve", "edm", "score_sde_ve")
KAPPAS = {
    **{k: v for k, v in SCHEDULES.items() if k not in UNIT_ALPHA},
    "log_linear": LogLinearKappa(1e-3),
    "linear_sigma": LinearSigmaKappa(1e-3, 7.0),
}


@pytest.mark.parametrize("name", KAPPAS)
def test_alpha_inverse_inverts_alpha_on_a_grid(name):
    """alpha_inverse(alpha(t)) == t on a grid over [0, 1], alpha increasing (the kappa_inverse of a discrete path)."""
    sch = KAPPAS[name]
    t = torch.linspace(0, 1, 201, dtype=torch.float64)
    alpha = sch(t).alpha
    assert bool((alpha[1:] > alpha[:-1]).all()), "alpha must increase for its inverse to exist"
    torch.testing.assert_close(sch.alpha_inverse(alpha), t, atol=1e-9, rtol=0)
    inv32 = sch.alpha_inverse(alpha.float())
    assert inv32.dtype == torch.float32


def test_unit_alpha_schedules_refuse_alpha_inverse():
    for name in UNIT_ALPHA:
        with pytest.raises(ValueError, match="alpha"):
            SCHEDULES[name].alpha_inverse(torch.ones(3))


@pytest.mark.parametrize("name", ["log_linear", "linear_sigma"])
def test_kappa_schedule_derivatives_match_central_differences(name):
    sch, h = KAPPAS[name], 1e-6
    t = torch.linspace(0.01, 0.99, 25, dtype=torch.float64)
    out, up, down = sch(t), sch(t + h), sch(t - h)
    torch.testing.assert_close(out.d_alpha, (up.alpha - down.alpha) / (2 * h), atol=1e-7, rtol=1e-6)
    torch.testing.assert_close(out.d_sigma, (up.sigma - down.sigma) / (2 * h), atol=1e-7, rtol=1e-6)
    torch.testing.assert_close(out.alpha + out.sigma, torch.ones_like(t))
