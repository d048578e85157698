"""Metrics against closed forms: Gaussian MMD, W2 (Bures), energy distance, Frechet distance; POT cross-checks for
sliced and 1-D Wasserstein; hand-computed precision / recall / density / coverage."""

from __future__ import annotations

import math

import numpy as np
import ot
import pytest
import scipy.linalg
import torch

from flowlab.core.manifolds import Sphere
from flowlab.core.metrics import (
    energy_distance,
    frechet_distance,
    frechet_distance_from_moments,
    median_bandwidth,
    mmd,
    precision_recall_knn,
    sinkhorn_distance,
    sinkhorn_distance_batched,
    sliced_wasserstein,
    wasserstein,
)

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# -- MMD -------------------------------------------------------------------------------------------------------------


def test_mmd_matches_the_gaussian_closed_form(device):
    """P = N(0, I), Q = N(m, I) in 2-D with k = exp(-|x-y|^2/(2h^2)): MMD^2 = 2c(1 - exp(-|m|^2/(2(h^2+2)))),
    c = (h^2/(h^2+2))^(d/2). Tolerance 0.03 (observed |error| <= 0.017 over 8 seeds at n = 1000)."""
    g, h, d = _gen(0), 1.0, 2
    x = torch.randn(1000, d, generator=g, dtype=F64).to(device)
    y = (torch.randn(1000, d, generator=g, dtype=F64) + torch.tensor([1.0, 0.0], dtype=F64)).to(device)
    z = torch.randn(1000, d, generator=g, dtype=F64).to(device)
    c = (h * h / (h * h + 2)) ** (d / 2)
    expected = 2 * c * (1 - math.exp(-1.0 / (2 * (h * h + 2))))
    assert float(mmd(x, y, bandwidth=h)) == pytest.approx(expected, abs=0.03)
    assert abs(float(mmd(x, z, bandwidth=h))) < 5e-3  # same distribution
    assert float(mmd(x, x, bandwidth=h, unbiased=False)) == pytest.approx(0.0, abs=1e-12)
    # a multi-scale kernel is the sum of the single-scale MMDs
    both = float(mmd(x, y, bandwidth=[0.5, 2.0]))
    assert both == pytest.approx(float(mmd(x, y, bandwidth=0.5)) + float(mmd(x, y, bandwidth=2.0)), rel=1e-10)
    assert float(mmd(x, y)) > 0.05  # median-heuristic bandwidth


def test_mmd_weights_equal_repeated_points():
    g = _gen(1)
    x, y = torch.randn(5, 2, generator=g, dtype=F64), torch.randn(7, 2, generator=g, dtype=F64)
    counts = torch.tensor([1.0, 3.0, 2.0, 1.0, 1.0], dtype=F64)
    repeated = x.repeat_interleave(counts.long(), 0)
    weighted = mmd(x, y, bandwidth=1.0, a=counts, unbiased=False)
    assert float(weighted) == pytest.approx(float(mmd(repeated, y, bandwidth=1.0, unbiased=False)), rel=1e-12)
    uniform = mmd(x, y, bandwidth=1.0, a=torch.ones(5, dtype=F64), b=torch.ones(7, dtype=F64))
    assert float(uniform) == pytest.approx(float(mmd(x, y, bandwidth=1.0)), rel=1e-12)


def test_geodesic_kernel_mmd_on_the_sphere():
    sphere, g = Sphere(2), _gen(2)
    u = torch.nn.functional.normalize(torch.randn(150, 3, generator=g, dtype=F64), dim=1)
    v = torch.nn.functional.normalize(torch.randn(150, 3, generator=g, dtype=F64), dim=1)
    cap = torch.nn.functional.normalize(torch.randn(150, 3, generator=g, dtype=F64) * 0.3 + torch.tensor([0, 0, 1.0]))
    h = median_bandwidth(u, v, manifold=sphere)
    assert h == pytest.approx(math.pi / 2, rel=0.1)  # median great-circle distance of uniform points
    # against the kernel written out with the arccos distance
    K = lambda a, b: torch.exp(-(torch.arccos((a @ b.T).clamp(-1, 1)) ** 2) / (2 * h * h))  # noqa: E731
    n = 150
    manual = (K(u, u).sum() - n) / (n * (n - 1)) + (K(cap, cap).sum() - n) / (n * (n - 1)) - 2 * K(u, cap).mean()
    assert float(mmd(u, cap, bandwidth=h, manifold=sphere)) == pytest.approx(float(manual), rel=1e-8)
    assert abs(float(mmd(u, v, manifold=sphere))) < 0.02 < 0.2 < float(mmd(u, cap, manifold=sphere))


# -- Wasserstein -----------------------------------------------------------------------------------------------------


def test_w2_of_a_translated_set_is_the_shift_norm_and_has_the_right_gradient():
    g = _gen(3)
    x = torch.randn(64, 3, generator=g, dtype=F64)
    shift = torch.tensor([0.3, -1.0, 2.0], dtype=F64)
    y = (x + shift).requires_grad_(True)
    w2 = wasserstein(x, y)
    assert float(w2.detach()) == pytest.approx(float(shift.norm()), rel=1e-10)
    (grad,) = torch.autograd.grad(w2**2, y)  # d/dy_j sum_ij G_ij |x_i - y_j|^2 = 2 (y_j - x_j) / n
    assert torch.allclose(grad, (2 * shift / 64).expand(64, 3), atol=1e-12)
    assert float(wasserstein(x, x + shift, p=1)) == pytest.approx(float(shift.norm()), rel=1e-10)


def test_w2_of_gaussian_samples_matches_the_bures_closed_form():
    """n = 800 per side in 2-D: relative error <= 0.08 (observed <= 0.055 over 8 seeds); 1-D with the sorted
    formula at n = 5000: absolute error <= 0.05 (observed <= 0.024)."""
    g = _gen(4)
    L = torch.tensor([[1.0, 0.3], [0.0, 0.5]], dtype=F64)
    cov_a, cov_b = L.T @ L, torch.diag(torch.tensor([0.49, 1.44], dtype=F64))
    mean_b = torch.tensor([1.0, -0.5], dtype=F64)
    x = torch.randn(800, 2, generator=g, dtype=F64) @ L
    y = torch.randn(800, 2, generator=g, dtype=F64) * cov_b.diag().sqrt() + mean_b
    bures = float(frechet_distance_from_moments(torch.zeros(2, dtype=F64), cov_a, mean_b, cov_b).sqrt())
    assert float(wasserstein(x, y)) == pytest.approx(bures, rel=0.08)
    u = 0.5 * torch.randn(5000, generator=g, dtype=F64)
    v = 1.5 * torch.randn(5000, generator=g, dtype=F64) + 1.0
    assert float(wasserstein(u, v)) == pytest.approx(math.sqrt(1.0 + 1.0), abs=0.05)  # (dm)^2 + (ds)^2


def test_one_dimensional_quantile_formula_matches_exact_ot_for_unequal_sizes():
    g = _gen(5)
    u, v = torch.randn(7, generator=g, dtype=F64), torch.randn(11, generator=g, dtype=F64) * 2
    for p in (1, 2, 3):
        fast = wasserstein(u, v, p=p)
        exact = wasserstein(u, v, p=p, a=torch.ones(7, dtype=F64))  # weights force the network-simplex solve
        assert float(fast) == pytest.approx(float(exact), rel=1e-10)


def test_sliced_wasserstein_matches_pot_and_the_translation_identity():
    g = _gen(6)
    x, y = torch.randn(40, 3, generator=g, dtype=F64), torch.randn(55, 3, generator=g, dtype=F64) + 0.5
    theta = torch.nn.functional.normalize(torch.randn(3, 32, generator=g, dtype=F64), dim=0)
    ours = sliced_wasserstein(x, y, projections=theta)
    pot = ot.sliced_wasserstein_distance(x.numpy(), y.numpy(), projections=theta.numpy(), p=2)
    assert float(ours) == pytest.approx(float(pot), rel=1e-6)
    equal = sliced_wasserstein(x, y[:40], projections=theta, p=1)
    pot = ot.sliced_wasserstein_distance(x.numpy(), y[:40].numpy(), projections=theta.numpy(), p=1)
    assert float(equal) == pytest.approx(float(pot), rel=1e-6)
    # a translation by s moves every projection by theta.s: SW_2^2 = mean (theta.s)^2, which is |s|^2/D on average
    s = torch.tensor([1.0, -2.0, 0.5], dtype=F64)
    exact = (theta.T @ s).square().mean().sqrt()
    assert float(sliced_wasserstein(x, x + s, projections=theta)) == pytest.approx(float(exact), rel=1e-10)
    many = sliced_wasserstein(x, x + s, num_projections=4000, generator=_gen(7))
    assert float(many) == pytest.approx(float(s.norm()) / math.sqrt(3), rel=0.05)
    assert float(sliced_wasserstein(x[:, :1], x[:, :1] - 0.7)) == pytest.approx(0.7, rel=1e-10)  # 1-D: the shift


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
def test_sinkhorn_distance_tends_to_exact_w2():
    g = _gen(8)
    x, y = torch.randn(8, 2, generator=g, dtype=F64), torch.randn(8, 2, generator=g, dtype=F64) + 1
    exact = float(wasserstein(x, y))
    gaps = [
        float(sinkhorn_distance(x, y, reg=reg, method="sinkhorn_log", num_iter_max=5000)) - exact
        for reg in (1.0, 0.1, 0.01)
    ]
    # the entropic plan's cost decreases to the exact one (a not fully converged plan may dip just below)
    assert gaps[0] > gaps[1] > abs(gaps[2]) and abs(gaps[2]) < 1e-3 * exact


def test_batched_sinkhorn_matches_pot_set_by_set_with_padding():
    """Ragged sets padded into one batch give POT's log-domain Sinkhorn value for each set (same iterations), for
    p = 1 and 2; padding coordinates (even NaN) are ignored; an empty set gives NaN."""
    g = _gen(9)
    sizes = [(5, 7), (12, 3), (1, 9), (8, 8)]
    x = torch.full((4, 12, 2), float("nan"), dtype=F64)
    y = torch.full((4, 9, 2), float("nan"), dtype=F64)
    xm, ym = torch.zeros(4, 12, dtype=torch.bool), torch.zeros(4, 9, dtype=torch.bool)
    for b, (n, m) in enumerate(sizes):
        x[b, :n], y[b, :m] = torch.randn(n, 2, generator=g, dtype=F64), 2 * torch.randn(m, 2, generator=g, dtype=F64)
        xm[b, :n], ym[b, :m] = True, True
    for p, reg in ((2, 0.5), (1, 0.2)):
        got = sinkhorn_distance_batched(x, y, reg=reg, p=p, x_mask=xm, y_mask=ym, num_iter=300)
        for b, (n, m) in enumerate(sizes):
            ref = sinkhorn_distance(x[b, :n], y[b, :m], reg=reg, p=p, method="sinkhorn_log", num_iter_max=300)
            assert float(got[b]) == pytest.approx(float(ref), rel=1e-6)
    xm[2] = False
    assert torch.isnan(sinkhorn_distance_batched(x, y, reg=0.5, x_mask=xm, y_mask=ym)[2])
    with pytest.raises(ValueError, match="x_mask"):
        sinkhorn_distance_batched(x, y, reg=0.5, x_mask=xm[:, :3], y_mask=ym)
    with pytest.raises(ValueError, match="NaN"):
        sinkhorn_distance_batched(x, y, reg=0.5)


# -- energy distance -------------------------------------------------------------------------------------------------


def _mean_abs_normal(delta: float, s: float) -> float:
    """E|Z| for Z ~ N(delta, s^2)."""
    return s * math.sqrt(2 / math.pi) * math.exp(-(delta**2) / (2 * s * s)) + delta * math.erf(
        delta / (s * math.sqrt(2))
    )


def test_energy_distance_matches_the_gaussian_closed_form():
    """Stratified samples x_i = Phi^-1((i - 1/2)/n) make the V-statistic converge at O(1/n) (error ~2e-4 at
    n = 200), so the closed form 2E|X-Y| - E|X-X'| - E|Y-Y'| is checked to 1e-3."""
    q = torch.special.ndtri((torch.arange(300, dtype=F64) + 0.5) / 300)[:, None]
    x, y = q, 1.5 * q + 1.0  # N(0, 1) and N(1, 1.5^2)
    expected = (
        2 * _mean_abs_normal(1.0, math.sqrt(1 + 1.5**2))
        - _mean_abs_normal(0.0, math.sqrt(2))
        - _mean_abs_normal(0.0, 1.5 * math.sqrt(2))
    )
    assert float(energy_distance(x, y, unbiased=False)) == pytest.approx(expected, abs=1e-3)
    g = _gen(9)
    u, v = torch.randn(800, 2, generator=g, dtype=F64), torch.randn(800, 2, generator=g, dtype=F64)
    assert abs(float(energy_distance(u, v))) < 0.01  # same distribution
    assert float(energy_distance(u, u, unbiased=False)) == pytest.approx(0.0, abs=1e-9)


# -- Frechet distance ------------------------------------------------------------------------------------------------


def test_frechet_distance_closed_forms_and_scipy_sqrtm():
    g = _gen(10)
    A = torch.randn(6, 6, generator=g, dtype=F64)
    B = torch.randn(6, 6, generator=g, dtype=F64)
    cov_a, cov_b = A @ A.T + 0.1 * torch.eye(6, dtype=F64), B @ B.T + 0.1 * torch.eye(6, dtype=F64)
    mu_a, mu_b = torch.randn(6, generator=g, dtype=F64), torch.randn(6, generator=g, dtype=F64)
    assert float(frechet_distance_from_moments(mu_a, cov_a, mu_a, cov_a)) == pytest.approx(0.0, abs=1e-9)
    root = scipy.linalg.sqrtm(cov_a.numpy() @ cov_b.numpy())
    reference = float(((mu_a - mu_b) ** 2).sum()) + np.trace(cov_a.numpy() + cov_b.numpy() - 2 * root.real)
    assert float(frechet_distance_from_moments(mu_a, cov_a, mu_b, cov_b)) == pytest.approx(reference, rel=1e-9)
    # commuting (diagonal) covariances: sum (sqrt(a_i) - sqrt(b_i))^2
    a, b = torch.tensor([1.0, 4.0, 9.0], dtype=F64), torch.tensor([4.0, 1.0, 9.0], dtype=F64)
    zero = torch.zeros(3, dtype=F64)
    assert float(frechet_distance_from_moments(zero, torch.diag(a), zero, torch.diag(b))) == pytest.approx(2.0)


def test_frechet_distance_of_features():
    g = _gen(11)
    feats = torch.randn(500, 4, generator=g, dtype=F64)
    other = torch.randn(20_000, 4, generator=g, dtype=F64) * 2 + 1
    assert float(frechet_distance(feats, feats)) == pytest.approx(0.0, abs=1e-9)
    assert float(frechet_distance(feats, other)) == pytest.approx(float(frechet_distance(other, feats)), rel=1e-9)
    big = torch.randn(20_000, 4, generator=g, dtype=F64)
    # N(0, I) vs N(1, 4 I): 4 * 1 + 4 * (2 - 1)^2 = 8; tolerance from the sampling error at n = 20 000
    assert float(frechet_distance(big, other)) == pytest.approx(8.0, abs=0.3)


# -- precision / recall / density / coverage -------------------------------------------------------------------------


def test_prdc_hand_computed_case():
    real = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    fake = torch.tensor([[0.5], [10.0], [2.2]])
    out = precision_recall_knn(real, fake, k=1)
    # real radii 1; fake radii 1.7, 7.8, 1.7
    assert out.precision == pytest.approx(2 / 3)  # 0.5 and 2.2 lie in real balls, 10 does not
    assert out.recall == pytest.approx(1.0)  # 0, 1, 2 within 1.7 of 0.5; 3 within 7.8 of 10
    assert out.density == pytest.approx(4 / 3)  # 0.5 in balls of 0, 1; 2.2 in balls of 2, 3
    assert out.coverage == pytest.approx(1.0)


def test_prdc_identical_and_disjoint_sets(device):
    g = _gen(12)
    x = torch.randn(200, 8, generator=g).to(device)
    same = precision_recall_knn(x, x.clone(), k=3, block=64)
    assert (same.precision, same.recall, same.coverage) == (1.0, 1.0, 1.0)
    far = precision_recall_knn(x, x + 100.0, k=3)
    assert (far.precision, far.recall, far.density, far.coverage) == (0.0, 0.0, 0.0, 0.0)


# -- bad input -------------------------------------------------------------------------------------------------------


def test_bad_inputs_name_the_argument():
    x = torch.randn(10, 2)
    with pytest.raises(ValueError, match=r"^bandwidth:"):
        mmd(x, x, bandwidth=-1.0)
    with pytest.raises(ValueError, match=r"^x, y:"):
        mmd(x, torch.randn(10, 3))
    with pytest.raises(ValueError, match=r"^a:"):
        mmd(x, x, a=torch.ones(3))
    with pytest.raises(ValueError, match=r"^y:"):
        wasserstein(x, torch.full((10, 2), math.nan))
    with pytest.raises(ValueError, match=r"^p:"):
        wasserstein(x, x, p=0.5)
    with pytest.raises(ValueError, match=r"^reg:"):
        sinkhorn_distance(x, x, reg=0.0)
    with pytest.raises(ValueError, match=r"^projections:"):
        sliced_wasserstein(x, x, projections=torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"^cov_a:"):
        frechet_distance_from_moments(
            torch.zeros(2), torch.tensor([[1.0, 0.5], [0.0, 1.0]]), torch.zeros(2), torch.eye(2)
        )
    with pytest.raises(ValueError, match=r"^feat_b:"):
        frechet_distance(x, torch.randn(10, 3))
    with pytest.raises(ValueError, match=r"^k:"):
        precision_recall_knn(x, x, k=10)
    with pytest.raises(ValueError, match=r"^manifold:"):
        energy_distance(x, x, manifold="sphere")
