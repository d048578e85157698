"""The bridge sampler and the EDM sampler from a given start: exact endpoints, the data law on a Gaussian problem with
the exact drift / denoiser, and clear errors."""

from __future__ import annotations

import pytest
import torch

from flowlab.core import grids
from flowlab.core.paths.bridge import AugmentedBridgePath
from flowlab.core.schedules import EDM
from flowlab.core.solvers import edm_sample, sample_bridge
from flowlab.core.testing.asserts import assert_moments_close

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_bridge_sampler_lands_exactly_on_a_deterministic_endpoint(device):
    """With x_1 = f(y) known, the exact drift is (f(y) - x) / (1 - t) and every grid ends on f(y) despite sigma."""
    y = torch.randn(32, 4, generator=_gen(0)).to(device)
    target = 2 * y.flip(-1) + 1

    def drift(*, x, t, y):
        return (2 * y.flip(-1) + 1 - x) / (1 - t[:, None])

    for grid in (grids.uniform(1), grids.uniform(7), torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0])):
        out = sample_bridge(drift, y, grid, sigma=0.8, generator=_gen(1), y=y)
        torch.testing.assert_close(out, target, atol=1e-5, rtol=0)


def _gaussian_drift(m: torch.Tensor, s: torch.Tensor, sigma: float):
    """E[(x_1 - x_t) / (1 - t) | x_t] for x_1 ~ N(m, diag s^2) bridged from x_0 = 0: x_t = t x_1 + sigma
    sqrt(t (1 - t)) z, so E[x_1 | x_t] = m + t s^2 / (t^2 s^2 + sigma^2 t (1 - t)) (x_t - t m)."""

    def drift(*, x, t):
        t = t[:, None]
        mean = m + t * s**2 / (t**2 * s**2 + sigma**2 * t * (1 - t)) * (x - t * m)
        return (mean - x) / (1 - t)

    return drift


def test_bridge_sampler_reaches_the_data_law_with_the_exact_drift():
    m, s, sigma = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([0.5, 1.5], dtype=F64), 1.0
    x0 = torch.zeros(20_000, 2, dtype=F64)
    grid = torch.linspace(1e-3, 1, 401, dtype=F64)  # E[x_1 | x_t] is 0/0 at t = 0 when x_0 is a point
    x = sample_bridge(_gaussian_drift(m, s, sigma), x0, grid, sigma=sigma, generator=_gen(2))
    # 5 standard errors of the sample moments plus the O(h) variance bias of the ancestral step at 400 steps
    assert_moments_close(x, m, torch.diag(s**2), extra_tol=0.03)
    deterministic = sample_bridge(_gaussian_drift(m, s, sigma), x0, grid, sigma=0.0)
    assert float(deterministic.std(0).max()) < 1e-9  # no noise: every sample follows the same path to E[x_1]


def test_augmented_source_is_the_observation_plus_its_noise():
    path = AugmentedBridgePath(0.5, source_noise=0.1)
    y = torch.randn(50_000, 1, generator=_gen(3), dtype=F64)
    diff = path.source(y, generator=_gen(4)) - y
    assert abs(float(diff.std()) - 0.1) < 5 * 0.1 * (2 / 50_000) ** 0.5
    assert path.source(y, generator=_gen(4)).equal(path.source(y, generator=_gen(4)))
    assert AugmentedBridgePath(0.5, source_noise=0.0).source(y) is y


def test_edm_sampler_from_a_noisy_observation_transports_it_to_the_data_law():
    """y = x + sigma_0 e is the VE state at sigma_0; the Heun sampler from y with the exact denoiser ends in the data
    law, and starting from sigmas[0] * noise is the same run as passing noise."""
    mean, std, sigma_0 = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([0.5, 2.0], dtype=F64), 0.7
    g = _gen(5)
    x = mean + std * torch.randn(20_000, 2, generator=g, dtype=F64)
    y = x + sigma_0 * torch.randn(x.shape, generator=g, dtype=F64)

    def denoiser(*, x, sigma):
        return mean + std**2 / (std**2 + sigma[:, None] ** 2) * (x - mean)

    sigmas = torch.cat([EDM(sigma_max=sigma_0)(grids.uniform(31, dtype=F64)).sigma, torch.zeros(1, dtype=F64)])
    out = edm_sample(denoiser, None, sigmas, x_init=y)
    assert_moments_close(out, mean, torch.diag(std**2), extra_tol=0.01)
    noise = torch.randn(64, 2, generator=g, dtype=F64)
    torch.testing.assert_close(edm_sample(denoiser, None, sigmas, x_init=sigmas[0] * noise),
                               edm_sample(denoiser, noise, sigmas))  # fmt: skip


def test_bad_input_names_the_argument():
    x = torch.zeros(4, 2)
    f = lambda *, x, t: x  # noqa: E731
    cases = [
        ("drift", lambda: sample_bridge(None, x, grids.uniform(2), sigma=1.0)),
        ("grid", lambda: sample_bridge(f, x, torch.tensor([0.0, 0.5]), sigma=1.0)),
        ("grid", lambda: sample_bridge(f, x, torch.tensor([1.0, 0.0]), sigma=1.0)),
        ("sigma", lambda: sample_bridge(f, x, grids.uniform(2), sigma=-1.0)),
        ("x_init", lambda: sample_bridge(f, x * float("nan"), grids.uniform(2), sigma=1.0)),
        ("noise, x_init", lambda: edm_sample(f, x, torch.tensor([1.0, 0.0]), x_init=x)),
        ("noise, x_init", lambda: edm_sample(f, None, torch.tensor([1.0, 0.0]))),
        ("x_init", lambda: edm_sample(f, None, torch.tensor([1.0, 0.0]), x_init=x.numpy())),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=name):
            call()
