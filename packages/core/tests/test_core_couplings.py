"""Couplings: exact OT is an optimal permutation, sampled plans follow the plan, Sinkhorn tends to exact OT,
unbalanced semi-couplings have the prescribed marginals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from flowlab.core.couplings import (
    ExactOTCoupling,
    IndependentCoupling,
    Plan,
    SampledOTCoupling,
    SinkhornCoupling,
    UnbalancedOTCoupling,
    cost_matrix,
    mm_unbalanced_kl,
)
from flowlab.core.manifolds import Euclidean, Sphere

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _brute_force_assignment(C: torch.Tensor) -> float:
    """Minimal mean cost over all permutations (small n only)."""
    n = C.shape[0]
    return min(sum(float(C[i, p[i]]) for i in range(n)) / n for p in itertools.permutations(range(n)))


def test_exact_ot_is_a_permutation_and_beats_independent(device):
    g = _gen(0)
    x_0 = torch.randn(128, 3, generator=g).to(device)
    x_1 = (torch.randn(128, 3, generator=g) + 1.5).to(device)
    out = ExactOTCoupling().pair(x_0, x_1)
    assert out.x_0 is x_0 and out.x_1.dtype == x_1.dtype and out.x_1.device == x_1.device
    assert torch.equal(out.index_1.sort().values, torch.arange(128, device=device))  # no duplicates, none dropped
    assert torch.equal(out.x_1, x_1[out.index_1])
    independent = (x_0 - x_1).square().sum(1).mean()
    paired = (out.x_0 - out.x_1).square().sum(1).mean()
    assert paired < 0.8 * independent
    assert out.cost == pytest.approx(float(paired), rel=1e-5)


def test_exact_ot_matches_brute_force_and_recovers_a_shuffle():
    g = _gen(1)
    x_0, x_1 = torch.randn(7, 2, generator=g, dtype=F64), torch.randn(7, 2, generator=g, dtype=F64)
    out = ExactOTCoupling().pair(x_0, x_1)
    C = (x_0[:, None] - x_1[None]).square().sum(-1)
    assert out.cost == pytest.approx(_brute_force_assignment(C), abs=1e-12)
    # a shuffled copy (tiny jitter) is paired back point for point
    perm = torch.randperm(50, generator=g)
    x = torch.randn(50, 4, generator=g, dtype=F64)
    out = ExactOTCoupling().pair(x, x[perm] + 1e-3)
    assert torch.allclose(out.x_1, x + 1e-3)


def test_exact_ot_callable_and_manifold_costs():
    g = _gen(2)
    x_0, x_1 = torch.randn(6, 2, generator=g, dtype=F64), torch.randn(6, 2, generator=g, dtype=F64)

    def l1(a, b):
        return (a[:, None] - b[None]).abs().sum(-1)

    out = ExactOTCoupling(l1).pair(x_0, x_1)
    assert out.cost == pytest.approx(_brute_force_assignment(l1(x_0, x_1)), abs=1e-12)
    assert torch.allclose(cost_matrix(x_0, x_1, Euclidean(2)), cost_matrix(x_0, x_1), atol=1e-12)
    # sphere: squared great-circle angle arccos(<x, y>)^2
    s_0 = torch.nn.functional.normalize(torch.randn(9, 3, generator=g, dtype=F64), dim=1)
    s_1 = torch.nn.functional.normalize(torch.randn(5, 3, generator=g, dtype=F64), dim=1)
    expected = torch.arccos((s_0 @ s_1.T).clamp(-1, 1)).square()
    assert torch.allclose(cost_matrix(s_0, s_1, Sphere(2)), expected, atol=1e-10)
    out = ExactOTCoupling(Sphere(2)).pair(s_0[:5], s_1)
    assert out.cost == pytest.approx(_brute_force_assignment(expected[:5]), abs=1e-10)


def test_sampled_ot_draws_pairs_in_proportion_to_the_plan():
    g = _gen(3)
    x_0, x_1 = torch.randn(4, 2, generator=g, dtype=F64), torch.randn(6, 2, generator=g, dtype=F64)
    G = ExactOTCoupling().plan(x_0, x_1).G
    assert torch.allclose(G.sum(1), torch.full((4,), 0.25, dtype=F64))
    n = 40_000
    out = SampledOTCoupling().pair(x_0, x_1, n=n, generator=_gen(4))
    assert torch.equal(out.x_0, x_0[out.index_0]) and torch.equal(out.x_1, x_1[out.index_1])
    counts = torch.zeros(4, 6, dtype=F64)
    counts.index_put_((out.index_0, out.index_1), torch.ones(n, dtype=F64), accumulate=True)
    sd = (G * (1 - G) / n).sqrt()
    assert bool(((counts / n - G).abs() <= 5 * sd + 1e-12).all())
    again = SampledOTCoupling().pair(x_0, x_1, n=n, generator=_gen(4))
    assert torch.equal(again.index_1, out.index_1)  # same generator, same pairs


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
def test_sinkhorn_tends_to_exact_ot_as_reg_shrinks():
    g = _gen(5)
    # points on a line, shuffled and jittered: a unique optimal permutation with a clear cost gap
    x_0 = torch.arange(6, dtype=F64)[:, None] * torch.tensor([[1.0, 0.5]], dtype=F64)
    x_1 = x_0[torch.randperm(6, generator=g)] + 0.05 * torch.randn(6, 2, generator=g, dtype=F64)
    exact = ExactOTCoupling().plan(x_0, x_1).G
    errors = []
    for reg in (1e-1, 1e-2, 3e-3):
        G = SinkhornCoupling(reg, num_iter_max=5000).plan(x_0, x_1).G
        assert torch.allclose(G.sum(1), torch.full((6,), 1 / 6, dtype=F64), atol=1e-5)
        errors.append(float((G - exact).abs().sum()))
    assert errors[0] > errors[1] > errors[2] and errors[2] < 1e-3
    # transport costs converge too, on an unstructured problem
    y_0, y_1 = torch.randn(10, 2, generator=g, dtype=F64), torch.randn(10, 2, generator=g, dtype=F64)
    exact_cost = ExactOTCoupling().pair(y_0, y_1).cost
    gaps = [
        SinkhornCoupling(reg, num_iter_max=5000).pair(y_0, y_1, generator=g).cost - exact_cost
        for reg in (1e-1, 1e-2, 3e-3)
    ]
    assert gaps[0] > gaps[1] > gaps[2] > -1e-9 and gaps[2] < 1e-2 * exact_cost


@pytest.mark.parametrize("reg", [0.0, 0.05])
def test_unbalanced_semi_couplings_have_the_given_marginals(reg):
    g = _gen(6)
    x_0, x_1 = torch.randn(30, 2, generator=g, dtype=F64), torch.randn(20, 2, generator=g, dtype=F64) + 1
    for masses in ({}, {"a": torch.rand(30, generator=g, dtype=F64) + 0.5, "b": torch.ones(20, dtype=F64)}):
        plan = UnbalancedOTCoupling(1.0, reg=reg, a=1.0, b=1.0).plan(x_0, x_1, **masses)
        assert plan.G.dtype == F64 and bool((plan.G >= 0).all())
        gamma_0, gamma_1 = plan.semi_couplings()
        assert torch.allclose(gamma_0.sum(1), plan.a, atol=1e-6, rtol=0)
        assert torch.allclose(gamma_1.sum(0), plan.b, atol=1e-6, rtol=0)
        if not masses:
            assert torch.equal(plan.a, torch.ones(30, dtype=F64))  # unit masses kept unnormalised


@pytest.mark.parametrize("reg_m", [1.0, (0.5, 2.0), np.float32(1.0), [2.0]])
def test_mm_unbalanced_follows_pots_iterates(reg_m):
    """The in-place solver reproduces `ot.unbalanced.mm_unbalanced` (stop threshold 0: every step) after any
    number of steps, with unequal masses and penalties, and a source row and a target column no pair can reach
    (costs so large that exp(-M / (lambda_1 + lambda_2)) underflows): they stay 0, not NaN."""
    ot = pytest.importorskip("ot")
    g = np.random.default_rng(0)
    a, b = g.uniform(0.5, 2.0, 40), g.uniform(0.5, 2.0, 30)
    M = g.uniform(0.0, 3.0, (40, 30))
    M[3], M[:, 5] = 1e10, 1e10
    for steps in (1, 7, 200):
        pot_reg = float(reg_m) if np.ndim(reg_m) == 0 else reg_m  # POT takes a Python number or a sequence
        ref = ot.unbalanced.mm_unbalanced(a, b, M, pot_reg, div="kl", numItermax=steps, stopThr=0.0)
        ours = mm_unbalanced_kl(a, b, M, reg_m, num_iter_max=steps)
        assert np.isfinite(ours).all() and not ours[3].any() and not ours[:, 5].any()
        np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-14)
    with pytest.raises(ValueError, match="reg_m"):
        mm_unbalanced_kl(a, b, M, (1.0, 2.0, 3.0))


def test_unbalanced_with_large_marginal_penalty_is_nearly_balanced():
    g = _gen(7)
    x_0, x_1 = torch.randn(16, 2, generator=g, dtype=F64), torch.randn(16, 2, generator=g, dtype=F64)
    loose = UnbalancedOTCoupling(0.1).plan(x_0, x_1)
    tight = UnbalancedOTCoupling(1e3, num_iter_max=20_000).plan(x_0, x_1)
    err = [float((p.G.sum(1) - p.a).abs().sum()) for p in (loose, tight)]
    assert err[1] < 0.02 and err[1] < err[0] / 10


def test_unbalanced_pair_sampling_and_chunked_blocks():
    g = _gen(8)
    x_0, x_1 = torch.randn(32, 2, generator=g, dtype=F64), torch.randn(24, 2, generator=g, dtype=F64)
    plan = UnbalancedOTCoupling(1.0, chunk=8).plan(x_0, x_1, generator=_gen(9))
    nonzero_per_row = (plan.G > 0).sum(1)
    assert int(nonzero_per_row.max()) <= 6  # 4 blocks: each source point sees only its block's 6 targets
    gamma_0, gamma_1 = plan.semi_couplings()
    assert torch.allclose(gamma_0.sum(1), plan.a, atol=1e-12) and torch.allclose(gamma_1.sum(0), plan.b, atol=1e-12)
    pairs = plan.sample_pairs(20_000, generator=_gen(10))
    assert bool((plan.G[pairs.i, pairs.j] > 0).all())  # never off the block diagonal
    freq = torch.zeros_like(gamma_0).index_put_((pairs.i, pairs.j), torch.ones(20_000, dtype=F64), accumulate=True)
    p = gamma_0 / gamma_0.sum()
    assert bool(((freq / 20_000 - p).abs() <= 5 * (p * (1 - p) / 20_000).sqrt() + 1e-12).all())
    assert torch.allclose(pairs.m_0, gamma_0[pairs.i, pairs.j] / gamma_0.sum() * plan.a.sum())


def test_independent_coupling_keeps_the_batches():
    x_0, x_1 = torch.randn(5, 2), torch.randn(5, 2)
    out = IndependentCoupling().pair(x_0, x_1)
    assert out.x_0 is x_0 and out.x_1 is x_1 and out.cost is None


def test_bad_inputs_name_the_argument():
    x = torch.randn(4, 2)
    with pytest.raises(ValueError, match=r"^x_1:"):
        ExactOTCoupling().pair(x, torch.randn(5, 2))
    with pytest.raises(ValueError, match="x_0, x_1"):
        ExactOTCoupling().pair(x, torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"^x_0:"):
        ExactOTCoupling().pair(torch.full((4, 2), math.nan), x)
    with pytest.raises(ValueError, match=r"^cost:"):
        ExactOTCoupling("l2")
    with pytest.raises(ValueError, match=r"^cost:"):
        ExactOTCoupling(lambda a, b: torch.zeros(2, 2)).pair(x, x)
    with pytest.raises(ValueError, match=r"^reg:"):
        SinkhornCoupling(-1.0)
    with pytest.raises(ValueError, match=r"^method:"):
        SinkhornCoupling(0.1, method="greenkhorn!")
    with pytest.raises(ValueError, match=r"^reg_m:"):
        UnbalancedOTCoupling(0.0)
    with pytest.raises(ValueError, match=r"^a:"):
        UnbalancedOTCoupling(1.0).plan(x, x, a=torch.ones(3))
    with pytest.raises(ValueError, match=r"^x_0:"):
        ExactOTCoupling(Sphere(2)).pair(torch.randn(3, 3) * 2, torch.randn(3, 3))
    with pytest.raises(ValueError, match=r"^G:.*mass"):
        Plan(G=torch.tensor([[1.0, 0.0], [0.0, 0.0]]), a=torch.ones(2), b=torch.ones(2)).semi_couplings()
    with pytest.raises(ValueError, match=r"^n:"):
        SampledOTCoupling().pair(x, x, n=0)
