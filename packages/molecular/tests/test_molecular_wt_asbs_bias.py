"""WT-ASBS's well-tempered bias grid: hills, interpolated gradients, forces through the CVs, the well-tempered limit."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.molecular.wt_asbs import CVSet, TorsionCV, WellTemperedBias


def _bias2d(**kw) -> WellTemperedBias:
    base = dict(sigma=0.3, height=1.0, bias_factor=8.0, kT=2.494, periodic=True)
    return WellTemperedBias((-math.pi, -math.pi), (math.pi, math.pi), (60, 60), **{**base, **kw})


def test_single_hill_equals_periodic_gaussian_at_nodes():
    bias = _bias2d()
    centre = torch.tensor([[3.0, -3.05]], dtype=torch.float64)  # near the corner: the hill wraps
    heights = bias.add_hills(centre)
    assert float(heights) == pytest.approx(1.0)  # empty bias: full height
    n0, n1 = bias.nodes
    # independent periodic Gaussian: sum over images
    total = torch.zeros(60, 60, dtype=torch.float64)
    for k0 in (-1, 0, 1):
        for k1 in (-1, 0, 1):
            d0 = n0[:, None] - centre[0, 0] + 2 * math.pi * k0
            d1 = n1[None, :] - centre[0, 1] + 2 * math.pi * k1
            total += torch.exp(-(d0**2 + d1**2) / (2 * 0.3**2))
    torch.testing.assert_close(bias.values, total, atol=1e-9, rtol=0)


def test_bias_gradient_matches_finite_differences_and_wraps_continuously(fd_grad):
    bias = WellTemperedBias(
        (-math.pi, -math.pi),
        (math.pi, math.pi),
        (300, 300),
        sigma=0.3,
        height=1.0,
        bias_factor=8,
        kT=2.494,
        periodic=True,
    )
    g = torch.Generator().manual_seed(3)
    bias.add_hills((torch.rand(20, 2, generator=g, dtype=torch.float64) * 2 - 1) * math.pi)
    s = (torch.rand(50, 2, generator=g, dtype=torch.float64) * 2 - 1) * 3.0
    grad = bias(s).grad
    fd = fd_grad(lambda z: bias(z).value, s, eps=float(bias.spacing[0]))
    # interpolated analytic gradient vs differences of the interpolated value: agree to the grid resolution
    assert float((grad - fd).abs().max()) < 0.05 * float(grad.abs().max()) + 1e-3
    edge = torch.tensor([[math.pi - 1e-9, 0.4], [-math.pi + 1e-9, 0.4]], dtype=torch.float64)
    v = bias(edge).value
    assert float((v[0] - v[1]).abs()) < 1e-6


def test_bias_forces_through_the_cv_jacobian_match_an_independent_evaluation():
    """-(dV/ds)(ds/dx) from the grid vs autograd of the analytic sum of Gaussians at phi(x)."""
    bias = WellTemperedBias(-math.pi, math.pi, 400, sigma=0.35, height=1.0, bias_factor=8, kT=1.0, periodic=True)
    centres = torch.tensor([[0.3], [-2.0], [2.9]], dtype=torch.float64)
    bias.add_hills(centres[:1])
    hs = torch.cat([torch.ones(1, dtype=torch.float64), bias.add_hills(centres[1:])])  # well-tempered heights
    assert bool((hs[1:] < 1).all())
    cvs = CVSet([TorsionCV((0, 1, 2, 3))])
    x = torch.randn(4, 12, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    forces = -cvs.pullback(x, bias(cvs(x)).grad)

    def analytic(xx):
        s = cvs(xx)[:, 0]
        d = s[:, None] - centres[:, 0][None]
        d = d - 2 * math.pi * torch.round(d / (2 * math.pi))
        return (torch.exp(-0.5 * (d / 0.35) ** 2) * hs[None]).sum(-1)

    xg = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(analytic(xg).sum(), xg)
    torch.testing.assert_close(forces, -ref, atol=2e-3, rtol=2e-3)


def test_free_energy_at_points_interpolates_the_grid_estimate():
    """free_energy(s) at the grid nodes equals free_energy() there (both shifted to min 0 over the same nodes)."""
    bias = WellTemperedBias(-2.0, 2.0, 41, sigma=0.3, height=0.5, bias_factor=5.0, kT=1.0)
    bias.add_hills(torch.tensor([[-0.5], [0.2], [1.1]], dtype=torch.float64))
    assert torch.allclose(bias.free_energy(bias.nodes[0][:, None]), bias.free_energy(), atol=1e-12)
    assert float(bias.free_energy().min()) == 0.0 and float(bias.free_energy().max()) > 0


def test_well_tempered_limit_on_a_1d_toy():
    """Depositing at exact samples of exp(-(F + V)) drives V -> -(1 - 1/gamma) F (+ const) within 0.2 kT."""
    g = torch.Generator().manual_seed(5)
    gamma, kT = 4.0, 1.0
    bias = WellTemperedBias(-2.5, 2.5, 251, sigma=0.15, height=0.05, bias_factor=gamma, kT=kT)
    s_grid = bias.nodes[0]
    free = 3.0 * (s_grid**2 - 1) ** 2 + 0.5 * s_grid  # exact F in kT
    for _ in range(400):
        logp = -(free + bias.values) / kT
        p = torch.softmax(logp, 0)
        idx = torch.multinomial(p, 64, replacement=True, generator=g)
        jitter = (torch.rand(64, generator=g, dtype=torch.float64) - 0.5) * bias.spacing[0]
        bias.add_hills((s_grid[idx] + jitter).clamp(-2.5, 2.5)[:, None])
    target = -(1 - 1 / gamma) * free
    mask = (free - free.min()) < 4.0  # the populated range
    diff = (bias.values - target)[mask]
    assert float((diff - diff.mean()).abs().max()) < 0.2


def test_walls_add_a_harmonic_restraint_outside_their_interval_and_stay_off_the_grid():
    """0.5 k (s - end)^2 beyond the interval, nothing inside it; hills and free_energy see only the grid; a wall
    outside the grid, a missing interval or one on a periodic CV is an error naming `walls`."""
    bias = WellTemperedBias(-0.3, 0.3, 61, sigma=0.01, height=1.0, bias_factor=5.0, kT=2.5, walls=((-0.2, 0.1),),
                            wall_k=1e4)  # fmt: skip
    s = torch.tensor([[-0.25], [0.0], [0.15]], dtype=torch.float64)
    v = bias(s)
    torch.testing.assert_close(v.value, torch.tensor([12.5, 0.0, 12.5], dtype=torch.float64))
    torch.testing.assert_close(v.grad.ravel(), torch.tensor([-500.0, 0.0, 500.0], dtype=torch.float64))
    bias.add_hills(torch.tensor([[0.0]], dtype=torch.float64))
    free = bias.free_energy()
    assert float(free.max() - free.min()) == pytest.approx(1.0 * 5.0 / 4.0, rel=1e-6)  # the hill alone
    for walls in (((-0.4, 0.1),), ((-0.2, 0.1), (0.0, 0.1)), ((0.1, -0.2),)):
        with pytest.raises(ValueError, match="walls"):
            WellTemperedBias(-0.3, 0.3, 61, sigma=0.01, height=1.0, bias_factor=5.0, kT=2.5, walls=walls)
    with pytest.raises(ValueError, match="walls"):
        _bias2d(walls=((-1.0, 1.0), None))
    assert _bias2d(walls=(None, None))(torch.zeros(1, 2, dtype=torch.float64)).value.item() == 0.0
