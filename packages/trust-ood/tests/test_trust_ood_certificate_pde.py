"""PDE generators: heat against an independent finite-difference solve, conservation laws, convergence, the
unchanged input law of the parameter-shift family, and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.stats import ks_2samp

from flowlab.trust_ood.certificate.pde1d import (
    FAMILIES,
    PDEConfig,
    burgers_solve,
    generate,
    heat_solve,
    initial_conditions,
)


def _fd_laplacian(n: int) -> np.ndarray:
    """Fourth-order central differences for u_xx on [0, 1) periodic."""
    h = 1.0 / n
    lap = np.zeros((n, n))
    for j in range(n):
        for off, w in ((-2, -1 / 12), (-1, 4 / 3), (0, -5 / 2), (1, 4 / 3), (2, -1 / 12)):
            lap[j, (j + off) % n] += w / h**2
    return lap


def test_heat_matches_finite_difference_solve_and_conserves_mean():
    rng = np.random.default_rng(0)
    n, kappa, t_final = 256, 0.8, 0.02
    u0 = initial_conditions("id", 3, n, rng) + 0.3  # a non-zero mean, to check it is kept
    fourier = heat_solve(u0, kappa, t_final)
    fd = u0 @ expm(kappa * t_final * _fd_laplacian(n)).T  # exact in time, 4th order in space
    assert np.abs(fourier - fd).max() < 1e-6
    np.testing.assert_allclose(fourier.mean(1), u0.mean(1), atol=1e-12)
    # the solution decays mode by mode: energy strictly drops
    assert (np.square(fourier - 0.3).sum(1) < np.square(u0 - 0.3).sum(1)).all()


def test_burgers_conserves_mass_and_converges_with_resolution():
    rng = np.random.default_rng(1)
    fine = 512
    u0_fine = initial_conditions("id", 4, fine, rng) + 0.2
    reference = burgers_solve(u0_fine, 0.02, 0.05)
    np.testing.assert_allclose(reference.mean(1), u0_fine.mean(1), atol=1e-12)
    errors = []
    for n in (32, 64, 128):
        step = fine // n
        u = burgers_solve(u0_fine[:, ::step], 0.02, 0.05)
        np.testing.assert_allclose(u.mean(1), u0_fine[:, ::step].mean(1), atol=1e-12)
        errors.append(np.abs(u - reference[:, ::step]).max())
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-4


def test_burgers_without_nonlinearity_is_the_heat_equation():
    rng = np.random.default_rng(2)
    u0 = 1e-8 * initial_conditions("id", 2, 64, rng)  # u u_x ~ 1e-8 u: pure diffusion to 1e-6 relative
    np.testing.assert_allclose(burgers_solve(u0, 0.5, 0.02), heat_solve(u0, 0.5, 0.02), rtol=0, atol=1e-14)


def test_param_shift_family_has_the_id_input_law_and_a_shifted_parameter():
    cfg = PDEConfig.default("heat", 32)
    a = generate(cfg, "id", 600, seed=3)
    b = generate(cfg, "param_shift", 600, seed=4)
    amp_a = np.abs(np.fft.rfft(a.u0, axis=1))
    amp_b = np.abs(np.fft.rfft(b.u0, axis=1))
    for k in range(1, 5):
        assert ks_2samp(amp_a[:, k], amp_b[:, k]).pvalue > 0.01
    assert a.param.max() <= cfg.param_range[1] < cfg.ood_param_range[0] <= b.param.min()


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_is_reproducible_and_finite(family):
    cfg = PDEConfig.default("burgers", 32)
    a, b = generate(cfg, family, 8, seed=5), generate(cfg, family, 8, seed=5)
    np.testing.assert_array_equal(a.u_final, b.u_final)
    assert a.u0.shape == a.u_final.shape == (8, 32) and np.isfinite(a.u_final).all()


def test_high_frequency_family_lives_in_modes_8_to_12():
    u0 = initial_conditions("high_freq", 5, 64, np.random.default_rng(6))
    power = np.abs(np.fft.rfft(u0, axis=1)) ** 2
    assert power[:, 8:13].sum() / power.sum() > 1 - 1e-12


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="u0"):
        heat_solve(np.full((2, 16), math.nan), 1.0, 0.1)
    with pytest.raises(ValueError, match="u0"):
        burgers_solve(np.zeros(16), 0.1, 0.1)
    with pytest.raises(ValueError, match="kappa"):
        heat_solve(np.zeros((2, 16)), -1.0, 0.1)
    with pytest.raises(ValueError, match="family"):
        generate(PDEConfig.default("heat", 32), "nope", 4, seed=0)
    with pytest.raises(ValueError, match="n:"):
        PDEConfig("heat", n=30)
    with pytest.raises(ValueError, match="pde"):
        PDEConfig.default("wave")
