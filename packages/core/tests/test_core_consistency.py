"""Multistep consistency sampling with the exact consistency function of a Gaussian, and its input checks."""

import math

import pytest
import torch

from flowlab.core.solvers import consistency_sample

F64 = torch.float64
MU, S, SIGMA_MIN = 0.4, 0.5, 0.002


def _exact(*, x, sigma):
    """The PF-ODE map of data N(MU, S^2) from level sigma down to SIGMA_MIN: f(x; SIGMA_MIN) = x."""
    ratio = math.sqrt(S**2 + SIGMA_MIN**2) / torch.sqrt(S**2 + sigma.reshape(-1, 1) ** 2)
    return MU + ratio * (x - MU)


@pytest.mark.parametrize("levels", [[80.0], [80.0, 0.8], [80.0, 2.0, 0.3]])
def test_exact_consistency_function_samples_the_data_law(levels):
    """Every step's output is N(MU, S^2 + SIGMA_MIN^2) exactly (re-noising to s restores the level-s marginal); the
    sample mean and variance of 20000 draws within 5 standard errors."""
    g = torch.Generator().manual_seed(0)
    n = 20000
    noise = torch.randn(n, 1, generator=g, dtype=F64)
    out = consistency_sample(_exact, noise, torch.tensor(levels, dtype=F64), sigma_min=SIGMA_MIN, generator=g)
    var = S**2 + SIGMA_MIN**2
    assert abs(float(out.mean()) - MU) < 5 * math.sqrt(var / n)
    assert abs(float(out.var()) - var) < 5 * var * math.sqrt(2 / n)


def test_per_sample_generators_make_samples_independent_of_the_batch():
    noise = torch.randn(4, 3, generator=torch.Generator().manual_seed(2), dtype=F64)
    sigmas = torch.tensor([80.0, 1.0], dtype=F64)
    gens = [torch.Generator().manual_seed(10 + i) for i in range(4)]
    full = consistency_sample(_exact, noise, sigmas, generator=gens)
    part = consistency_sample(
        _exact, noise[2:], sigmas, generator=[torch.Generator().manual_seed(12 + i) for i in range(2)]
    )
    torch.testing.assert_close(full[2:], part)
    gens = [torch.Generator().manual_seed(10 + i) for i in range(4)]
    traj = consistency_sample(_exact, noise, sigmas, generator=gens, return_trajectory=True)
    assert traj.states.shape == (2, 4, 3)
    torch.testing.assert_close(traj.states[-1], full)


def test_bad_levels_are_refused():
    noise = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="strictly decreasing"):
        consistency_sample(_exact, noise, torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="above sigma_min"):
        consistency_sample(_exact, noise, torch.tensor([80.0, 0.001]))
    with pytest.raises(ValueError, match="at least one noise level"):
        consistency_sample(_exact, noise, torch.tensor(80.0))
