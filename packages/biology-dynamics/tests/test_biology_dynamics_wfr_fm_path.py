"""The closed-form Dirac WFR geodesic: endpoints, the continuity equation, its action, and its limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlab.biology_dynamics.wfr_fm.path import WFRDiracPath, wfr_cost, wfr_distance_sq


@pytest.fixture(autouse=True)
def _float64():
    """Finite differences need double precision; restore the default dtype afterwards."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _pairs(n: int = 64, d: int = 3, delta: float = 1.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x0 = torch.randn(n, d, generator=g)
    direction = torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)
    dist = torch.rand(n, generator=g) * 0.95 * math.pi * delta  # inside the reachable ball
    x1 = x0 + dist[:, None] * direction
    m0 = 0.2 + 2 * torch.rand(n, generator=g)
    m1 = 0.2 + 2 * torch.rand(n, generator=g)
    return x0, x1, m0, m1


def test_endpoints_match_positions_and_masses():
    path = WFRDiracPath(1.0)
    x0, x1, m0, m1 = _pairs()
    n = x0.shape[0]
    at0 = path.sample(x0, x1, m0, m1, torch.zeros(n))
    at1 = path.sample(x0, x1, m0, m1, torch.ones(n))
    torch.testing.assert_close(at0.x_s, x0, atol=1e-12, rtol=0)
    torch.testing.assert_close(at0.m_s, m0, atol=1e-12, rtol=0)
    torch.testing.assert_close(at1.x_s, x1, atol=1e-9, rtol=0)  # total displacement equals |Δ|
    torch.testing.assert_close(at1.m_s, m1, atol=1e-12, rtol=0)


def test_rates_are_derivatives_of_position_and_log_mass():
    """u = dx_s/ds and g = d ln m(s)/ds (central differences): the Dirac m(s) δ_{x_s} solves the WFR continuity
    equation ∂_s μ + ∇·(μ u) = g μ."""
    path = WFRDiracPath(0.7)
    x0, x1, m0, m1 = _pairs(delta=0.7)
    n, h = x0.shape[0], 1e-6
    for s_val in (0.1, 0.5, 0.9):
        s = torch.full((n,), s_val)
        mid = path.sample(x0, x1, m0, m1, s)
        hi, lo = path.sample(x0, x1, m0, m1, s + h), path.sample(x0, x1, m0, m1, s - h)
        torch.testing.assert_close(mid.u, (hi.x_s - lo.x_s) / (2 * h), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(mid.g, (hi.m_s.log() - lo.m_s.log()) / (2 * h), atol=1e-6, rtol=1e-6)


def test_smoothed_dirac_satisfies_continuity_equation_on_a_grid():
    """Weak form with a narrow Gaussian bump as test function φ: d/ds ∫φ dμ = ∫(∇φ·u + φ g) dμ."""
    path = WFRDiracPath(1.0)
    x0 = torch.tensor([[0.0, 0.0]])
    x1 = torch.tensor([[1.5, 0.5]])
    m0, m1 = torch.tensor([0.6]), torch.tensor([1.7])
    grid = torch.stack(torch.meshgrid(torch.linspace(-1, 3, 21), torch.linspace(-1, 2, 16), indexing="ij"), -1)
    centres, width = grid.reshape(-1, 2), 0.3

    def phi(x):  # (P, 2) test functions evaluated at the Dirac location x: (1, 2)
        return torch.exp(-((x - centres) ** 2).sum(-1) / (2 * width**2))

    h = 1e-5
    for s_val in (0.2, 0.6):
        s = torch.tensor([s_val])
        p = path.sample(x0, x1, m0, m1, s)
        plus, minus = path.sample(x0, x1, m0, m1, s + h), path.sample(x0, x1, m0, m1, s - h)
        lhs = (plus.m_s * phi(plus.x_s) - minus.m_s * phi(minus.x_s)) / (2 * h)
        grad_phi = -phi(p.x_s)[:, None] * (p.x_s - centres) / width**2
        rhs = p.m_s * (grad_phi @ p.u[0] + phi(p.x_s) * p.g)
        torch.testing.assert_close(lhs, rhs, atol=1e-6, rtol=1e-5)


def test_mass_identity():
    """(A s − B)² + τ² S² = A m(s): equivalently ‖u‖² + δ² g² = 4δ² A / m(s), constant times 1/m."""
    delta = 1.3
    path = WFRDiracPath(delta)
    x0, x1, m0, m1 = _pairs(delta=delta, seed=2)
    s = torch.rand(x0.shape[0], generator=torch.Generator().manual_seed(3))
    p = path.sample(x0, x1, m0, m1, s)
    lagrangian = p.m_s * (p.u.square().sum(1) + delta**2 * p.g.square())  # = 4δ² A, independent of s
    p2 = path.sample(x0, x1, m0, m1, torch.zeros_like(s))
    torch.testing.assert_close(lagrangian, p2.m_s * (p2.u.square().sum(1) + delta**2 * p2.g.square()))


@pytest.mark.parametrize("delta", [0.5, 2.0])
def test_action_equals_half_squared_wfr_distance(delta):
    path = WFRDiracPath(delta)
    x0, x1, m0, m1 = _pairs(n=16, delta=delta, seed=4)
    nodes, w = (torch.from_numpy(v) for v in np.polynomial.legendre.leggauss(40))
    s_nodes, weights = (nodes + 1) / 2, w / 2
    action = torch.zeros(16)
    for s_val, wt in zip(s_nodes, weights):
        p = path.sample(x0, x1, m0, m1, torch.full((16,), float(s_val)))
        action += wt * p.m_s * (0.5 * p.u.square().sum(1) + 0.5 * delta**2 * p.g.square())
    torch.testing.assert_close(action, 0.5 * wfr_distance_sq(x0, x1, m0, m1, delta), atol=1e-6, rtol=1e-6)


def test_pure_growth_limit():
    path = WFRDiracPath(1.0)
    x0 = torch.randn(5, 2, generator=torch.Generator().manual_seed(0))
    m0, m1 = torch.tensor([0.5, 1.0, 2.0, 1.0, 3.0]), torch.tensor([2.0, 1.0, 0.5, 4.0, 0.1])
    s = torch.linspace(0, 1, 5)
    p = path.sample(x0, x0.clone(), m0, m1, s)
    torch.testing.assert_close(p.x_s, x0)
    torch.testing.assert_close(p.m_s, ((1 - s) * m0.sqrt() + s * m1.sqrt()) ** 2)
    assert torch.isfinite(p.u).all() and (p.u == 0).all()


def test_large_delta_recovers_straight_path_targets():
    """δ → ∞ with equal masses: x_s → (1−s) x0 + s x1, u → Δ/Δt, g → 0 (the OT-CFM targets)."""
    x0, x1, m0, _ = _pairs(delta=1.0, seed=5)
    s = torch.rand(x0.shape[0], generator=torch.Generator().manual_seed(6))
    errors = []
    for delta in (10.0, 100.0, 1000.0):
        p = WFRDiracPath(delta).sample(x0, x1, m0, m0.clone(), s, dt=2.0)
        err = (p.u - (x1 - x0) / 2.0).abs().max() + (p.x_s - (x0 + s[:, None] * (x1 - x0))).abs().max()
        errors.append(float(err + p.g.abs().max()))
    assert errors[-1] < 1e-5
    assert errors[0] > errors[1] > errors[2]  # converges as δ grows


def test_real_time_rates_scale_with_interval():
    x0, x1, m0, m1 = _pairs(n=8, seed=7)
    s = torch.full((8,), 0.3)
    a = WFRDiracPath(1.0).sample(x0, x1, m0, m1, s, dt=1.0)
    b = WFRDiracPath(1.0).sample(x0, x1, m0, m1, s, dt=0.25)
    torch.testing.assert_close(b.u, 4 * a.u)
    torch.testing.assert_close(b.g, 4 * a.g)


def test_cost_is_minus_log_cos_squared_and_saturates():
    cost = wfr_cost(1.0)
    x = torch.zeros(1, 2)
    y = torch.tensor([[0.0, 0.0], [1.0, 0.0], [4.0, 0.0]])
    c = cost(x, y)[0]
    assert c[0] == pytest.approx(0.0, abs=1e-9)
    assert c[1] == pytest.approx(-math.log(math.cos(0.5) ** 2), rel=1e-8)
    assert c[2] == pytest.approx(-math.log(1e-10), rel=1e-6)  # beyond πδ: finite but prohibitive


def test_bad_inputs_raise():
    path = WFRDiracPath(1.0)
    x0, x1, m0, m1 = _pairs(n=4)
    s = torch.full((4,), 0.5)
    with pytest.raises(ValueError, match="delta"):
        WFRDiracPath(0.0)
    with pytest.raises(ValueError, match="m_0"):
        path.sample(x0, x1, -m0, m1, s)
    with pytest.raises(ValueError, match="s"):
        path.sample(x0, x1, m0, m1, s + 1)
    with pytest.raises(ValueError, match="πδ"):
        path.sample(x0, x0 + 10.0, m0, m1, s)
