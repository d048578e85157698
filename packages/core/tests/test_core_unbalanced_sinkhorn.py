"""The translation-invariant unbalanced Sinkhorn: closed forms, agreement with long majorisation-minimisation (the
unregularised optimum), its sparse kernel, the coupling's `solver="sinkhorn"` and bad input."""

import math

import numpy as np
import pytest
import torch

from flowlab.core.couplings import UnbalancedOTCoupling, mm_unbalanced_kl
from flowlab.core.unbalanced_sinkhorn import unbalanced_sinkhorn_kl

F64 = torch.float64


def _objective(G, M, a, b, rho1=1.0, rho2=1.0):
    """<M, G> + ρ1 KL(G 1 | a) + ρ2 KL(Gᵀ 1 | b), the unregularised primal."""

    def kl(p, q):
        return float((p * torch.log(p.clamp_min(1e-300) / q) - p + q).sum())

    return float((G * M).sum()) + rho1 * kl(G.sum(1), a) + rho2 * kl(G.sum(0), b)


def _clusters(n, m, seed):
    """The (n, m) cost between two 2-D clouds of two clusters, on the WFR scale: -log cos^2(distance / 2), capped."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[0.0, 0.0], [3.0, 0.0]], dtype=F64)
    x0 = centres[torch.arange(n) % 2] + 0.4 * torch.randn(n, 2, generator=g, dtype=F64)
    x1 = centres[torch.arange(m) % 3 % 2] + 0.4 * torch.randn(m, 2, generator=g, dtype=F64) + 0.3
    angle = (torch.cdist(x0, x1) / 2).clamp_max(math.pi / 2)
    return -torch.log(angle.cos().square() + 1e-10)


@pytest.mark.parametrize(("rho", "eps"), [((1.0, 1.0), 0.1), ((0.5, 2.0), 1e-3), ((3.0, 3.0), 1.0)])
def test_one_point_each_side_has_the_closed_form(rho, eps):
    """n = m = 1, masses a, b, cost c: the optimum of <c, G> + ρ1 KL(G|a) + ρ2 KL(G|b) + ε KL(G|ab) solves
    c + ρ1 log(G/a) + ρ2 log(G/b) + ε log(G/ab) = 0 (solved to a tight tolerance: the fixed point is exact)."""
    a, b, c = torch.tensor([0.7], dtype=F64), torch.tensor([1.9], dtype=F64), torch.tensor([[0.8]], dtype=F64)
    sol = unbalanced_sinkhorn_kl(a, b, c, rho, eps=eps, tol=1e-9)
    r1, r2 = rho
    log_g = (-0.8 + (r1 + eps) * math.log(0.7) + (r2 + eps) * math.log(1.9)) / (r1 + r2 + eps)
    assert sol.converged
    assert float(sol.plan[0, 0]) == pytest.approx(math.exp(log_g), rel=1e-7)


def test_matches_the_unregularised_optimum_of_long_majorisation_minimisation():
    """On 200 x 260 clustered points, the ε = 1e-4 plan reaches the primal objective of 20,000 MM steps (itself an
    entropic plan at ε = 1e-4) to 1e-4 relative, and its transport cost and mass to 1 %; the default ε = 3e-4 stays
    within 1 % of the cost, and both lie below 1,000 MM steps' objective."""
    M = _clusters(200, 260, 0)
    a, b = torch.ones(200, dtype=F64), torch.ones(260, dtype=F64)
    exact = torch.from_numpy(mm_unbalanced_kl(a.numpy(), b.numpy(), M.numpy(), 1.0, num_iter_max=20_000))
    short = torch.from_numpy(mm_unbalanced_kl(a.numpy(), b.numpy(), M.numpy(), 1.0, num_iter_max=1000))
    reference = _objective(exact, M, a, b)
    for eps, cost_tol in ((1e-4, 0.01), (3e-4, 0.01)):
        sol = unbalanced_sinkhorn_kl(a, b, M, 1.0, eps=eps)
        assert sol.converged and sol.plan.dtype == F64
        value = _objective(sol.plan, M, a, b)
        assert value < _objective(short, M, a, b)
        assert abs(float((sol.plan * M).sum()) / float((exact * M).sum()) - 1) < cost_tol
        assert abs(float(sol.plan.sum()) / float(exact.sum()) - 1) < 0.01
        if eps == 1e-4:
            assert abs(value / reference - 1) < 1e-4


def test_the_sparse_kernel_gives_the_plan_of_the_untruncated_one():
    """At small ε the truncated kernel keeps under 5 % of the entries and goes sparse (CSR); the plan equals the one
    solved with (almost) nothing truncated, a dense kernel throughout, entry by entry to float32 matvec precision."""
    M = _clusters(300, 300, 1)
    a, b = torch.ones(300, dtype=F64), torch.ones(300, dtype=F64)
    sparse = unbalanced_sinkhorn_kl(a, b, M, 1.0, eps=3e-4)
    full = unbalanced_sinkhorn_kl(a, b, M, 1.0, eps=3e-4, truncate=400.0)
    assert sparse.density < 0.05 < full.density
    scale = float(full.plan.max())
    assert float((sparse.plan - full.plan).abs().max()) < 1e-3 * scale
    assert float(sparse.plan.sum()) == pytest.approx(float(full.plan.sum()), rel=1e-4)


def test_translation_keeps_small_eps_fast():
    """Plain unbalanced Sinkhorn contracts the translation mode (f + τ, g − τ) only by κ = ρ / (ρ + ε) a step: at
    ε = 3e-4 that is thousands of steps. With the closed-form translation the whole ε-scaled solve of 200 x 260
    points takes fewer than 2,000 steps."""
    M = _clusters(200, 260, 2)
    sol = unbalanced_sinkhorn_kl(torch.ones(200, dtype=F64), torch.ones(260, dtype=F64), M, 1.0, eps=3e-4)
    assert sol.converged and sol.iterations < 2000


def test_the_coupling_solver_sinkhorn_agrees_with_mm():
    g = torch.Generator().manual_seed(3)
    x0 = torch.randn(150, 2, generator=g, dtype=F64)
    x1 = torch.randn(180, 2, generator=g, dtype=F64) + 0.5
    mm = UnbalancedOTCoupling(1.0, a=1.0, b=1.0, num_iter_max=20_000).plan(x0, x1)
    sk = UnbalancedOTCoupling(1.0, a=1.0, b=1.0, solver="sinkhorn", eps=1e-4).plan(x0, x1)
    M = torch.cdist(x0, x1).square()
    M = M / M.max()
    assert sk.G.shape == (150, 180) and sk.G.dtype == F64 and torch.equal(sk.a, torch.ones(150, dtype=F64))
    assert float((sk.G * M).sum()) == pytest.approx(float((mm.G * M).sum()), rel=0.01)
    assert float(sk.G.sum()) == pytest.approx(float(mm.G.sum()), rel=1e-3)
    gamma_0, _ = sk.semi_couplings()
    assert torch.allclose(gamma_0.sum(1), sk.a)
    chunked = UnbalancedOTCoupling(1.0, solver="sinkhorn", chunk=50).plan(x0, x1, generator=torch.Generator())
    assert int((chunked.G > 0).sum(1).max()) <= 60  # 3 blocks of at most 60 targets


def test_bad_input_is_named():
    a, b, M = torch.ones(3, dtype=F64), torch.ones(2, dtype=F64), torch.rand(3, 2, dtype=F64)
    with pytest.raises(ValueError, match="M: expected shape"):
        unbalanced_sinkhorn_kl(a, b, M.T, 1.0)
    with pytest.raises(ValueError, match="masses must be positive"):
        unbalanced_sinkhorn_kl(-a, b, M, 1.0)
    with pytest.raises(ValueError, match="M: contains NaN or inf"):
        unbalanced_sinkhorn_kl(a, b, M.masked_fill(M > 0.5, math.inf), 1.0)
    with pytest.raises(ValueError, match="omega"):
        unbalanced_sinkhorn_kl(a, b, M, 1.0, omega=2.0)
    with pytest.raises(ValueError, match="absorb, truncate"):
        unbalanced_sinkhorn_kl(a, b, M, 1.0, absorb=30.0)
    with pytest.raises(ValueError, match="reg_m"):
        unbalanced_sinkhorn_kl(a, b, M, (1.0, 0.0))
    with pytest.raises(ValueError, match="eps"):
        unbalanced_sinkhorn_kl(a, b, M, 1.0, eps=0.0)
    with pytest.raises(ValueError, match="solver"):
        UnbalancedOTCoupling(1.0, solver="lbfgs")
    with pytest.raises(ValueError, match="reg = 0"):
        UnbalancedOTCoupling(1.0, reg=0.1, solver="sinkhorn")


def test_a_stage_that_does_not_converge_warns():
    M = _clusters(40, 40, 4)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        sol = unbalanced_sinkhorn_kl(torch.ones(40, dtype=F64), torch.ones(40, dtype=F64), M, 1.0, max_iter=1)
    assert not sol.converged and np.isfinite(sol.plan.numpy()).all()
