"""Manifolds: exp/log/dist identities, transport, projections, sampling, volumes, wrapped normals, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.manifolds import (
    Euclidean,
    FlatTorus,
    Lorentz,
    Manifold,
    PoincareBall,
    Product,
    Simplex,
    Sphere,
    WrappedNormal,
    lorentz_to_poincare,
    poincare_to_lorentz,
)

F64 = torch.float64

MANIFOLDS = {
    "euclidean": lambda: Euclidean(3),
    "circle": lambda: Sphere(1),
    "sphere2": lambda: Sphere(2),
    "sphere4": lambda: Sphere(4),
    "torus": lambda: FlatTorus(3),
    "poincare": lambda: PoincareBall(3, base_scale=0.8),
    "poincare_c": lambda: PoincareBall(2, c=0.5),
    "lorentz": lambda: Lorentz(3, base_scale=0.8),
    "lorentz_c": lambda: Lorentz(2, c=2.0, base_scale=0.6),
    "simplex": lambda: Simplex(4),
    "product": lambda: Product([Sphere(2), FlatTorus(1), PoincareBall(2, base_scale=0.7)]),
}
COMPACT = {"circle", "sphere2", "sphere4", "torus", "simplex"}


def points(m: Manifold, n: int, seed: int) -> torch.Tensor:
    return m.random_base(n, generator=torch.Generator().manual_seed(seed), dtype=F64)


def tangent(m: Manifold, x: torch.Tensor, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return scale * m.proju(x, torch.randn(x.shape, generator=g, dtype=F64))


@pytest.fixture(params=sorted(MANIFOLDS))
def manifold(request) -> Manifold:
    return MANIFOLDS[request.param]()


def test_projx_is_idempotent_and_lands_on_the_manifold(manifold):
    x = points(manifold, 16, 0)
    noisy = x + 0.05 * torch.randn(x.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    p = manifold.projx(noisy)
    assert manifold.belongs(p).all()
    torch.testing.assert_close(manifold.projx(p), p, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(manifold.projx(x), x, rtol=1e-10, atol=1e-10)


def test_exp_of_log_returns_the_target(manifold):
    x, y = points(manifold, 32, 0), points(manifold, 32, 1)
    torch.testing.assert_close(manifold.expmap(x, manifold.logmap(x, y)), y, rtol=1e-8, atol=1e-9)


def test_log_of_exp_returns_a_short_tangent_vector(manifold):
    x = points(manifold, 32, 2)
    if isinstance(manifold, Simplex):  # keep the geodesic inside the simplex: Fisher-Rao distance to a face > 0.7
        x = 0.5 * x + 0.5 / manifold.ambient_dim
    u = tangent(manifold, x, 3)
    u = 0.5 * u / manifold.norm(x, u).unsqueeze(-1)  # length 0.5: inside every injectivity radius here
    torch.testing.assert_close(manifold.logmap(x, manifold.expmap(x, u)), u, rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(manifold.dist(x, manifold.expmap(x, u)), torch.full((32,), 0.5, dtype=F64))


def test_dist_is_symmetric_and_equals_the_log_norm(manifold):
    x, y = points(manifold, 32, 4), points(manifold, 32, 5)
    d = manifold.dist(x, y)
    torch.testing.assert_close(d, manifold.dist(y, x), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(d, manifold.norm(x, manifold.logmap(x, y)), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(manifold.dist(x, x), torch.zeros(32, dtype=F64), rtol=0, atol=1e-7)


def test_logmap_and_proju_give_tangent_vectors(manifold):
    x, y = points(manifold, 16, 6), points(manifold, 16, 7)
    log = manifold.logmap(x, y)
    torch.testing.assert_close(manifold.proju(x, log), log, rtol=1e-9, atol=1e-9)
    u = tangent(manifold, x, 8)
    torch.testing.assert_close(manifold.proju(x, u), u, rtol=1e-12, atol=1e-12)


def test_parallel_transport_is_an_isometry_along_the_geodesic(manifold):
    x, y = points(manifold, 16, 9), points(manifold, 16, 10)
    u, v = tangent(manifold, x, 11), tangent(manifold, x, 12)
    pu, pv = manifold.transp(x, y, u), manifold.transp(x, y, v)
    torch.testing.assert_close(manifold.inner(y, pu, pv), manifold.inner(x, u, v), rtol=1e-8, atol=1e-9)
    torch.testing.assert_close(manifold.proju(y, pu), pu, rtol=1e-8, atol=1e-9)
    # the geodesic's own velocity is carried to its velocity at the end: P(log_x y) = -log_y x
    torch.testing.assert_close(
        manifold.transp(x, y, manifold.logmap(x, y)), -manifold.logmap(y, x), rtol=1e-8, atol=1e-9
    )


def test_base_samples_lie_on_the_manifold_and_are_reproducible(manifold):
    a = manifold.random_base(64, generator=torch.Generator().manual_seed(3), dtype=F64)
    b = manifold.random_base(64, generator=torch.Generator().manual_seed(3), dtype=F64)
    assert a.shape == (64, manifold.ambient_dim) and a.dtype == F64
    assert manifold.belongs(a).all()
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    lp = manifold.base_log_prob(a)
    assert lp.shape == (64,) and torch.isfinite(lp).all()


def test_uniform_sampling_and_volume_exist_exactly_on_compact_manifolds(request, manifold):
    name = request.node.callspec.params["manifold"]
    if name not in COMPACT:
        with pytest.raises(NotImplementedError):
            manifold.random_uniform(4)
        with pytest.raises(NotImplementedError):
            manifold.log_volume()
        return
    x = manifold.random_uniform(64, generator=torch.Generator().manual_seed(0), dtype=F64)
    assert manifold.belongs(x).all()
    torch.testing.assert_close(manifold.base_log_prob(x), torch.full((64,), -manifold.log_volume(), dtype=F64))


@pytest.mark.parametrize(
    ("m", "volume"),
    [
        (Sphere(1), 2 * math.pi),
        (Sphere(2), 4 * math.pi),
        (Sphere(3), 2 * math.pi**2),
        (FlatTorus(2), (2 * math.pi) ** 2),
        (Simplex(2), math.pi),  # the Fisher-Rao simplex is a quarter of the radius-2 circle: length pi
        (Simplex(3), 2 * math.pi),  # an eighth of the radius-2 sphere: 16 pi / 8
        (Product([Sphere(2), FlatTorus(1)]), 4 * math.pi * 2 * math.pi),
    ],
    ids=repr,
)
def test_log_volume_closed_forms(m, volume):
    assert m.log_volume() == pytest.approx(math.log(volume), rel=1e-12)


def test_sphere_uniform_density_integrates_to_one():
    """Midpoint quadrature in spherical coordinates: sum exp(base_log_prob) sin(theta) dtheta dphi = 1."""
    s = Sphere(2)
    n = 200
    th = (torch.arange(n, dtype=F64) + 0.5) / n * math.pi
    z = torch.stack([th.sin(), torch.zeros_like(th), th.cos()], -1)
    total = (s.base_log_prob(z).exp() * th.sin()).sum() * (math.pi / n) * 2 * math.pi
    assert float(total) == pytest.approx(1.0, abs=1e-4)


def test_uniform_sphere_moments():
    """E[x] = 0, E[x x^T] = I / (d+1); 5 standard errors for 20000 draws."""
    x = Sphere(3).random_uniform(20000, generator=torch.Generator().manual_seed(0), dtype=F64)
    se = 5 * math.sqrt(1 / 4 / 20000)
    assert x.mean(0).abs().max() < se
    cov = x.T @ x / 20000
    assert (cov - torch.eye(4, dtype=F64) / 4).abs().max() < 5 * math.sqrt(0.2 / 20000)


def test_simplex_uniform_is_dirichlet_half_and_dirichlet_helpers():
    m = Simplex(3)
    g = torch.Generator().manual_seed(0)
    n = 20000
    alpha = torch.tensor([0.3, 1.0, 2.5], dtype=F64)
    for draws, a in (
        (m.random_uniform(n, generator=g, dtype=F64), torch.full((3,), 0.5, dtype=F64)),
        (m.random_dirichlet(n, alpha, generator=g, dtype=F64), alpha),
    ):
        assert m.belongs(draws).all()
        a0 = a.sum()
        mean, var = a / a0, a * (a0 - a) / (a0**2 * (a0 + 1))
        assert ((draws.mean(0) - mean).abs() < 5 * (var / n).sqrt()).all()
        assert ((draws.var(0) - var).abs() < 0.1 * var).all()
    x = m.random_dirichlet(8, alpha, generator=g, dtype=F64)
    lebesgue = torch.distributions.Dirichlet(alpha).log_prob(x)
    torch.testing.assert_close(m.dirichlet_log_prob(x, alpha), lebesgue + 0.5 * x.log().sum(-1))
    # Dirichlet(1/2) is the Fisher-Rao uniform distribution
    torch.testing.assert_close(m.dirichlet_log_prob(x, 0.5), m.base_log_prob(x))


def test_simplex_per_sample_dirichlet_concentrations():
    """(B, L, K) concentrations, one Dirichlet per sample and position (e.g. psi pi + m e_b of a Wright-Fisher
    lineage draw): the draws have each position's moments (5 s.e.), the log-density equals torch's Dirichlet plus
    the Fisher-Rao term per position, and small concentrations stay finite (Gamma draws in float64)."""
    m = Simplex(4)
    rows = torch.tensor([[0.5, 0.5, 0.5, 0.5], [0.5, 20.5, 0.5, 0.5], [3.0, 1.0, 0.2, 0.7]], dtype=F64)
    n = 20000
    alpha = rows.expand(n, 3, 4)
    draws = m.random_dirichlet(n, alpha, generator=torch.Generator().manual_seed(4))
    assert draws.shape == (n, 3, 4) and draws.dtype == F64
    assert m.belongs(draws.reshape(-1, 4)).all()
    a0 = rows.sum(-1, keepdim=True)
    mean, var = rows / a0, rows * (a0 - rows) / (a0**2 * (a0 + 1))
    assert ((draws.mean(0) - mean).abs() < 5 * (var / n).sqrt()).all()
    x = draws[:8]
    want = torch.distributions.Dirichlet(alpha[:8]).log_prob(x) + 0.5 * x.log().sum(-1)
    torch.testing.assert_close(m.dirichlet_log_prob(x, alpha[:8]), want)
    torch.testing.assert_close(m.dirichlet_log_prob(x, rows), want)  # (L, K) broadcasts over the batch
    small = m.random_dirichlet(64, torch.full((64, 2, 4), 0.02), generator=torch.Generator().manual_seed(5))
    assert small.dtype == torch.float32 and bool(
        torch.isfinite(m.dirichlet_log_prob(small, torch.full((4,), 0.02))).all()
    )
    with pytest.raises(ValueError, match=r"alpha: expected per-sample concentrations with 5 rows"):
        m.random_dirichlet(5, alpha[:4])
    with pytest.raises(ValueError, match=r"alpha: expected concentrations \(\.\.\., 4\)"):
        m.random_dirichlet(2, torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"alpha: shape .* does not broadcast"):
        m.dirichlet_log_prob(x, torch.ones(5, 3, 4, dtype=F64))
    with pytest.raises(ValueError, match="alpha: expected finite positive"):
        m.dirichlet_log_prob(x, -alpha[:8])


def test_simplex_distance_is_the_fisher_rao_closed_form():
    m = Simplex(5)
    x, y = points(m, 16, 0), points(m, 16, 1)
    closed = 2 * torch.arccos((x * y).sqrt().sum(-1).clamp(max=1))
    torch.testing.assert_close(m.dist(x, y), closed, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(Simplex.from_sphere(Simplex.to_sphere(x)), x)
    torch.testing.assert_close(Simplex.to_sphere(x).norm(dim=-1), torch.full((16,), 2.0, dtype=F64))


def test_sphere_log_is_accurate_for_nearby_and_antipodal_points():
    s = Sphere(2)
    x = points(s, 8, 0)
    u = tangent(s, x, 1)
    u = 1e-9 * u / u.norm(dim=-1, keepdim=True)
    y = s.expmap(x, u)
    torch.testing.assert_close(s.logmap(x, y), u, rtol=1e-5, atol=1e-20)
    torch.testing.assert_close(s.dist(x, y), torch.full((8,), 1e-9, dtype=F64), rtol=1e-5, atol=1e-20)
    # exactly antipodal: a tangent vector of length pi whose exponential is -x
    torch.testing.assert_close(s.dist(x, -x), torch.full((8,), math.pi, dtype=F64))
    log = s.logmap(x, -x)
    torch.testing.assert_close(log.norm(dim=-1), torch.full((8,), math.pi, dtype=F64))
    torch.testing.assert_close(s.proju(x, log), log)
    torch.testing.assert_close(s.expmap(x, log), -x, rtol=1e-12, atol=1e-12)


def test_exp_and_log_have_finite_gradients_at_zero():
    for m in (Sphere(2), PoincareBall(2), Lorentz(2), Simplex(3)):
        x = points(m, 4, 0)
        u = torch.zeros_like(x, requires_grad=True)
        (grad,) = torch.autograd.grad(m.expmap(x, u).sum(), u)
        assert torch.isfinite(grad).all(), m
        y = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(m.logmap(x, y).pow(2).sum() + m.logmap(x, y).sum(), y)
        assert torch.isfinite(grad).all(), m


def test_sphere_exp_gradcheck_near_zero():
    s = Sphere(2)
    x = points(s, 3, 0)
    u = (1e-5 * tangent(s, x, 1)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v: s.expmap(x, v), (u,))


def test_float32_inputs_keep_their_dtype():
    for m in (Sphere(2), PoincareBall(2), FlatTorus(2), Simplex(3)):
        x = m.random_base(16, generator=torch.Generator().manual_seed(0), dtype=torch.float32)
        y = m.random_base(16, generator=torch.Generator().manual_seed(1), dtype=torch.float32)
        out = m.expmap(x, m.logmap(x, y))
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, y, rtol=1e-3, atol=2e-4)


def test_poincare_lorentz_round_trip_and_isometry():
    ball, hyp = PoincareBall(3), Lorentz(3)
    x, y = points(ball, 32, 0), points(ball, 32, 1)
    lx, ly = ball.to_lorentz(x), ball.to_lorentz(y)
    assert hyp.belongs(lx).all()
    torch.testing.assert_close(ball.from_lorentz(lx), x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(hyp.from_poincare(hyp.to_poincare(lx)), lx, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(hyp.dist(lx, ly), ball.dist(x, y), rtol=1e-9, atol=1e-10)
    # the closed-form distance on the hyperboloid: arccosh(-<x, y>_L)
    torch.testing.assert_close(ball.dist(x, y), torch.arccosh(-hyp.minkowski(lx, ly).squeeze(-1)), rtol=1e-7, atol=1e-7)
    # curvature -c: the map scales with 1 / sqrt(c)
    c = 0.5
    z = PoincareBall(2, c=c).projx(torch.tensor([[0.4, -0.9], [0.0, 0.1]], dtype=F64))
    torch.testing.assert_close(lorentz_to_poincare(poincare_to_lorentz(z, c), c), z)
    assert Lorentz(2, c=c).belongs(poincare_to_lorentz(z, c)).all()


def test_poincare_closed_forms():
    ball = PoincareBall(2)
    x = torch.tensor([[0.5, 0.0], [0.0, -0.3]], dtype=F64)
    # distance from the origin: 2 artanh ||x||; conformal factor 2 / (1 - ||x||^2)
    torch.testing.assert_close(ball.dist(torch.zeros_like(x), x), 2 * torch.atanh(x.norm(dim=-1)))
    torch.testing.assert_close(ball.lambda_x(x).squeeze(-1), 2 / (1 - x.pow(2).sum(-1)))
    a, b, w = (
        ball.projx(0.4 * torch.randn(6, 2, generator=torch.Generator().manual_seed(i), dtype=F64)) for i in range(3)
    )
    by_definition = ball.mobius_add(-ball.mobius_add(a, b), ball.mobius_add(a, ball.mobius_add(b, w)))
    torch.testing.assert_close(ball.gyration(a, b, w), by_definition, rtol=1e-10, atol=1e-12)


def test_poincare_projx_clips_to_the_documented_radius():
    ball = PoincareBall(2)
    p = ball.projx(torch.tensor([[3.0, 4.0], [0.1, 0.2]], dtype=F64))
    assert float(p[0].norm()) == pytest.approx(1 - 1e-5, abs=1e-15)
    torch.testing.assert_close(p[1], torch.tensor([0.1, 0.2], dtype=F64))
    torch.testing.assert_close(p[0] / p[0].norm(), torch.tensor([0.6, 0.8], dtype=F64))


def test_torus_angles_are_wrapped_into_minus_pi_pi():
    t = FlatTorus(2)
    x = t.projx(torch.tensor([[math.pi, -math.pi], [7.0, -7.0]], dtype=F64))
    assert ((x >= -math.pi) & (x < math.pi)).all()
    torch.testing.assert_close(x[1], torch.tensor([7.0 - 2 * math.pi, -7.0 + 2 * math.pi], dtype=F64))
    a = torch.tensor([[3.0, 0.0]], dtype=F64)
    b = torch.tensor([[-3.0, 0.5]], dtype=F64)
    torch.testing.assert_close(t.logmap(a, b), torch.tensor([[2 * math.pi - 6.0, 0.5]], dtype=F64))


# -- wrapped normals ------------------------------------------------------------------------------------------------


def _disk_grid(n_r: int, n_phi: int):
    """Midpoint polar grid on the unit disk: points (N, 2) and Lebesgue weights (N,)."""
    r = (torch.arange(n_r, dtype=F64) + 0.5) / n_r
    phi = (torch.arange(n_phi, dtype=F64) + 0.5) / n_phi * 2 * math.pi
    rr, pp = torch.meshgrid(r, phi, indexing="ij")
    x = torch.stack([rr * pp.cos(), rr * pp.sin()], -1).reshape(-1, 2)
    return x, rr.reshape(-1) / n_r * (2 * math.pi / n_phi)


def test_wrapped_normal_on_the_poincare_disk_integrates_to_one_and_matches_its_samples():
    """Quadrature with the Poincare volume element lambda_x^2 dx (independent of the hyperbolic polar form):
    the density integrates to 1 (1e-4) and its mean matches the sample mean of 20000 draws (5 s.e.)."""
    ball = PoincareBall(2)
    wn = WrappedNormal(ball, torch.tensor([0.3, -0.2], dtype=F64), torch.tensor([0.4, 0.7], dtype=F64))
    x, w = _disk_grid(300, 64)
    mass = wn.log_prob(x).exp() * ball.lambda_x(x).squeeze(-1) ** 2 * w
    assert float(mass.sum()) == pytest.approx(1.0, abs=1e-4)
    mean = (mass.unsqueeze(-1) * x).sum(0)
    z = wn.sample(20000, generator=torch.Generator().manual_seed(0))
    assert ball.belongs(z).all()
    assert ((z.mean(0) - mean).abs() < 5 * z.std(0) / math.sqrt(20000)).all()


def test_wrapped_normal_closed_form_on_hyperbolic_space():
    """log_prob = log N(v) - (d-1) log(sinh r / r), r = d(mean, z); E[r^2] = d sigma^2 (5 s.e.)."""
    ball, sigma = PoincareBall(3), 0.9
    mean = torch.tensor([0.1, 0.4, -0.2], dtype=F64)
    wn = WrappedNormal(ball, mean, sigma)
    z = wn.sample(20000, generator=torch.Generator().manual_seed(1))
    r = ball.dist(mean.expand_as(z), z)
    closed = (
        -0.5 * (r / sigma) ** 2 - 3 * math.log(sigma) - 1.5 * math.log(2 * math.pi) - 2 * torch.log(torch.sinh(r) / r)
    )
    torch.testing.assert_close(wn.log_prob(z), closed, rtol=1e-8, atol=1e-8)
    assert abs(float((r**2).mean()) - 3 * sigma**2) < 5 * float((r**2).std()) / math.sqrt(20000)
    # the base distribution is the wrapped normal at the origin
    base = PoincareBall(3, base_scale=sigma)
    torch.testing.assert_close(base.base_log_prob(z), WrappedNormal(base, torch.zeros(3, dtype=F64), sigma).log_prob(z))


def test_wrapped_normal_agrees_between_poincare_and_lorentz():
    ball, hyp = PoincareBall(2), Lorentz(2)
    mean, scale = torch.tensor([0.3, -0.2], dtype=F64), torch.tensor([0.4, 0.7], dtype=F64)
    wb = WrappedNormal(ball, mean, scale)
    wl = WrappedNormal(hyp, ball.to_lorentz(mean[None])[0], scale)
    z = wb.sample(64, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(wl.log_prob(ball.to_lorentz(z)), wb.log_prob(z), rtol=1e-9, atol=1e-9)
    # same draws up to the isometry (same tangent Gaussian, transported and exponentiated in each model)
    zl = wl.sample(64, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(hyp.to_poincare(zl), z, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("scale", [0.3, 1.2, (0.8, 1.6), 3.0], ids=str)
def test_wrapped_normal_on_the_sphere_integrates_to_one(scale):
    """Midpoint quadrature on S^2 in spherical coordinates (sin theta weights) with the pole at the mean, where the
    density's integrable singularities sit; windings make it exact even where the mass wraps around (5e-4).
    Sample means match the density's mean (so `sample` and `log_prob` describe the same law)."""
    s = Sphere(2)
    mean = torch.nn.functional.normalize(torch.tensor([0.2, -0.5, 0.8], dtype=F64), dim=0)
    frame, _ = torch.linalg.qr(torch.stack([mean, torch.eye(3, dtype=F64)[0], torch.eye(3, dtype=F64)[1]], 1))
    wn = WrappedNormal(s, mean, torch.tensor(scale, dtype=F64))
    n = 150
    th = ((torch.arange(n, dtype=F64) + 0.5) / n * math.pi).repeat_interleave(n).unsqueeze(-1)
    ph = ((torch.arange(n, dtype=F64) + 0.5) / n * 2 * math.pi).repeat(n).unsqueeze(-1)
    z = th.sin() * ph.cos() * frame[:, 1] + th.sin() * ph.sin() * frame[:, 2] + th.cos() * mean
    mass = wn.log_prob(z).exp() * th.squeeze(-1).sin() * (math.pi / n) * (2 * math.pi / n)
    assert float(mass.sum()) == pytest.approx(1.0, abs=5e-4)
    # the sampler draws from this density: sample mean vs quadrature mean (5 s.e. + quadrature error)
    draws = wn.sample(20000, generator=torch.Generator().manual_seed(0))
    assert s.belongs(draws).all()
    expected = (mass.unsqueeze(-1) * z).sum(0)
    assert ((draws.mean(0) - expected).abs() < 5 * draws.std(0) / math.sqrt(20000) + 1e-3).all()


def test_wrapped_normal_on_the_sphere_reduces_to_the_single_chart_form_for_small_scale():
    s, sigma = Sphere(2), 0.3
    mean = s.origin(dtype=F64)
    wn = WrappedNormal(s, mean, sigma)
    z = wn.sample(256, generator=torch.Generator().manual_seed(0))
    assert s.belongs(z).all()
    r = s.dist(mean.expand_as(z), z)
    single = -0.5 * (r / sigma) ** 2 - 2 * math.log(sigma) - math.log(2 * math.pi) - torch.log(torch.sin(r) / r)
    torch.testing.assert_close(wn.log_prob(z), single, rtol=1e-12, atol=1e-12)


def test_wrapped_normal_on_the_torus_is_the_per_angle_wrapped_gaussian():
    t = FlatTorus(2)
    wn = WrappedNormal(t, torch.tensor([3.0, -1.0], dtype=F64), torch.tensor([0.5, 2.5], dtype=F64))
    n = 200
    a = (torch.arange(n, dtype=F64) + 0.5) / n * 2 * math.pi - math.pi
    aa, bb = torch.meshgrid(a, a, indexing="ij")
    z = torch.stack([aa, bb], -1).reshape(-1, 2)
    assert float(wn.log_prob(z).exp().sum() * (2 * math.pi / n) ** 2) == pytest.approx(1.0, abs=1e-6)
    draws = wn.sample(64, generator=torch.Generator().manual_seed(0))
    assert t.belongs(draws).all()


def test_wrapped_normal_on_euclidean_space_is_the_gaussian():
    e = Euclidean(2)
    mean, scale = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([0.5, 3.0], dtype=F64)
    wn = WrappedNormal(e, mean, scale)
    z = wn.sample(32, generator=torch.Generator().manual_seed(0))
    expected = torch.distributions.Normal(mean, scale).log_prob(z).sum(-1)
    torch.testing.assert_close(wn.log_prob(z), expected)


def test_wrapped_normal_on_a_product_adds_up():
    prod = Product([Sphere(2), PoincareBall(2)])
    mean = torch.cat([Sphere(2).origin(dtype=F64), torch.tensor([0.2, 0.1], dtype=F64)])
    scale = torch.tensor([0.3, 0.4, 0.5, 0.6], dtype=F64)
    wn = WrappedNormal(prod, mean, scale)
    z = wn.sample(16, generator=torch.Generator().manual_seed(0))
    assert prod.belongs(z).all()
    parts = WrappedNormal(Sphere(2), mean[:3], scale[:2]).log_prob(z[:, :3]) + WrappedNormal(
        PoincareBall(2), mean[3:], scale[2:]
    ).log_prob(z[:, 3:])
    torch.testing.assert_close(wn.log_prob(z), parts)


# -- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "bad"),
    [
        (Sphere(2), [[1.0, 1.0, 0.0]]),
        (FlatTorus(2), [[4.0, 0.0]]),
        (PoincareBall(2), [[0.8, 0.8]]),
        (Lorentz(2), [[-1.0, 0.0, 0.0]]),
        (Lorentz(2), [[2.0, 0.0, 0.0]]),
        (Simplex(3), [[0.5, 0.6, -0.1]]),
        (Simplex(3), [[0.5, 0.6, 0.1]]),
        (Product([Sphere(1), FlatTorus(1)]), [[1.0, 0.0, 3.5]]),
    ],
    ids=lambda v: repr(v) if isinstance(v, Manifold) else "",
)
def test_points_off_the_manifold_raise_naming_the_argument(m, bad):
    x = torch.tensor(bad, dtype=F64)
    assert not m.belongs(x).any()
    with pytest.raises(ValueError, match=r"^x:"):
        m.base_log_prob(x)
    with pytest.raises(ValueError, match=r"^my_point:"):
        m.check_point(x, "my_point")


def test_malformed_input_raises_naming_the_argument():
    s = Sphere(2)
    with pytest.raises(ValueError, match=r"^x:.*shape"):
        s.check_point(torch.ones(3, dtype=F64))
    with pytest.raises(ValueError, match=r"^x:.*shape"):
        s.base_log_prob(torch.ones(2, 4, dtype=F64))
    with pytest.raises(ValueError, match=r"^x:.*NaN"):
        s.check_point(torch.tensor([[float("nan"), 0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"^mean:"):
        WrappedNormal(s, torch.tensor([1.0, 1.0, 0.0]), 1.0)
    with pytest.raises(ValueError, match=r"^mean:"):
        WrappedNormal(s, -s.origin(), 1.0)  # antipode of the origin: transport undefined
    with pytest.raises(ValueError, match=r"^scale:"):
        WrappedNormal(s, s.origin(), -1.0)
    with pytest.raises(ValueError, match=r"^scale:"):
        WrappedNormal(s, s.origin(), torch.ones(3))
    with pytest.raises(ValueError, match=r"^z:"):
        WrappedNormal(s, s.origin(), 1.0).log_prob(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"^n:"):
        s.random_uniform(0)
    for bad in (lambda: Sphere(0), lambda: Euclidean(1.5), lambda: FlatTorus(-1), lambda: Simplex(1)):
        with pytest.raises(ValueError, match=r"^(d|K):"):
            bad()
    with pytest.raises(ValueError, match=r"^c:"):
        PoincareBall(2, c=0.0)
    with pytest.raises(ValueError, match=r"^base_scale:"):
        Lorentz(2, base_scale=-1.0)
    with pytest.raises(ValueError, match=r"^factors:"):
        Product([])
    with pytest.raises(ValueError, match=r"^alpha:"):
        Simplex(3).random_dirichlet(4, [1.0, -1.0, 1.0])


def test_at_boundary_marks_points_projx_pinned_to_the_ball_edge():
    ball = PoincareBall(2, c=4.0)
    x = torch.tensor([[0.0, 0.0], [0.3, 0.2], [3.0, 4.0], [0.499999, 0.0], [0.49999, 0.0]])
    assert ball.at_boundary(ball.projx(x)).tolist() == [False, False, True, True, False]
    prod = Product([Sphere(2), ball])
    y = torch.cat([Sphere(2).random_base(4, generator=torch.Generator().manual_seed(0)), ball.projx(x[:4])], dim=-1)
    assert prod.at_boundary(y).tolist() == [False, False, True, True]
    assert not Sphere(2).at_boundary(y[:, :3]).any()
