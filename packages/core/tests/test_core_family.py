"""Rectified-flow time <-> EDM sigma: the adapters against the exact velocity and denoiser of a Gaussian mixture,
and one model sampled in either family reaching the same ODE endpoint."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from flowlab.core.grids import uniform
from flowlab.core.nets.family import DenoiserAsVelocity, VelocityAsDenoiser, rf_sigma, rf_time
from flowlab.core.schedules import EDM
from flowlab.core.solvers import edm_sample, solve_ode
from flowlab.core.testing.analytic import GaussianMixture

MIX = GaussianMixture.ring(4, radius=2.0, std=0.3).to(dtype=torch.float64)


def exact_velocity(*, x, t):
    return MIX.velocity(x, t)


def exact_denoiser(*, x, sigma):
    """E[x_1 | x_1 + sigma x_0 = x] of the mixture, from its CondOT posterior mean at t = 1 / (1 + sigma)."""
    t = 1 / (1 + sigma)
    return MIX.posterior_mean(x * t[:, None], t)


def test_time_and_sigma_round_trip():
    t = torch.linspace(1e-3, 1, 101, dtype=torch.float64)
    assert torch.allclose(rf_time(rf_sigma(t)), t, rtol=0, atol=1e-14)
    sigma = torch.logspace(-3, 2, 101, dtype=torch.float64)
    assert torch.allclose(rf_sigma(rf_time(sigma)), sigma, rtol=1e-12, atol=0)
    assert float(rf_sigma(torch.ones(1))) == 0.0 and float(rf_time(torch.zeros(1))) == 1.0


def test_velocity_as_denoiser_is_the_exact_denoiser():
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    sigma = torch.logspace(-2, 1.5, 64, dtype=torch.float64)
    got = VelocityAsDenoiser(exact_velocity)(x=x, sigma=sigma)
    assert torch.allclose(got, exact_denoiser(x=x, sigma=sigma), atol=1e-10)


def test_denoiser_as_velocity_is_the_exact_velocity():
    x = torch.randn(64, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    t = torch.linspace(0.02, 0.98, 64, dtype=torch.float64)
    got = DenoiserAsVelocity(exact_denoiser, sigma_min=0)(x=x, t=t)
    assert torch.allclose(got, exact_velocity(x=x, t=t), atol=1e-9)
    round_trip = DenoiserAsVelocity(VelocityAsDenoiser(exact_velocity), sigma_min=0)(x=x, t=t)
    assert torch.allclose(round_trip, exact_velocity(x=x, t=t), atol=1e-12)


def _start(n: int, sigma_max: float):
    noise = torch.randn(n, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    return noise, rf_time(torch.tensor(sigma_max, dtype=torch.float64))


def test_euler_in_t_equals_euler_in_sigma():
    """Both Euler steps are the DDIM step of one path: identical samples on matching grids (float rounding)."""
    noise, t0 = _start(256, 80.0)
    sigmas = torch.cat([EDM()(uniform(11, dtype=torch.float64)).sigma, torch.zeros(1, dtype=torch.float64)])
    x = 80.0 * noise
    denoiser = VelocityAsDenoiser(exact_velocity)
    for s, s_next in itertools.pairwise(sigmas):
        level = s.expand(x.shape[0])
        x = x + (s_next - s) * (x - denoiser(x=x, sigma=level)) / s
    in_t = solve_ode(exact_velocity, t0 * 80.0 * noise, rf_time(sigmas), method="euler")
    assert torch.allclose(in_t, x, atol=1e-10)


def test_heun_in_either_family_reaches_the_same_endpoint():
    """A rectified-flow teacher (the exact velocity) through edm_sample via VelocityAsDenoiser, and an EDM teacher
    (the exact denoiser) through solve_ode via DenoiserAsVelocity, on the same Karras grid, against a 4000-step RK4
    solve of the same ODE: both second order (measured: 4x the steps cut the error 12-13x; the bound is 8x) and
    within 1.5e-3 (max over 512 points) at 256 steps."""
    sigma_max = 80.0
    noise, t0 = _start(512, sigma_max)
    x_init = t0 * sigma_max * noise
    reference = solve_ode(exact_velocity, x_init, torch.linspace(float(t0), 1, 4001, dtype=torch.float64), method="rk4")
    errors = {}
    for steps in (64, 256):
        sigmas = EDM(sigma_max=sigma_max)(uniform(steps - 1, dtype=torch.float64)).sigma
        sigmas = torch.cat([sigmas, torch.zeros(1, dtype=torch.float64)])
        in_edm = edm_sample(VelocityAsDenoiser(exact_velocity), noise, sigmas)
        in_rf = solve_ode(DenoiserAsVelocity(exact_denoiser), x_init, rf_time(sigmas), method="heun")
        errors[steps] = [float((x - reference).abs().max()) for x in (in_edm, in_rf)]
    assert all(fine < 1.5e-3 for fine in errors[256]), errors
    assert all(coarse > 8 * fine for coarse, fine in zip(errors[64], errors[256])), errors


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rf_sigma(torch.zeros(2)), "t: expected rectified-flow times in"),
        (lambda: rf_time(-torch.ones(2)), "sigma: expected noise levels >= 0"),
        (lambda: VelocityAsDenoiser("v"), "field: expected a callable"),
        (lambda: DenoiserAsVelocity(exact_denoiser, sigma_min=-1), "sigma_min: expected a number >= 0"),
        (
            lambda: VelocityAsDenoiser(exact_velocity)(x=torch.zeros(3, 2), sigma=torch.ones(2)),
            r"sigma: expected shape \(3,\)",
        ),
        (lambda: DenoiserAsVelocity(exact_denoiser, sigma_min=0)(x=torch.zeros(2, 2), t=torch.ones(2)), "t = 1"),
        (
            lambda: DenoiserAsVelocity(exact_denoiser)(x=torch.full((2, 2), math.nan), t=torch.ones(2)),
            "x: contains NaN",
        ),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
