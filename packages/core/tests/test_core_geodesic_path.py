"""GeodesicPath: endpoints, staying on the manifold, dx_t against central differences of x_t, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.manifolds import Euclidean, FlatTorus, Lorentz, Manifold, PoincareBall, Product, Simplex, Sphere, wrap
from flowlab.core.paths.affine import AffinePath
from flowlab.core.paths.geodesic import GeodesicPath
from flowlab.core.schedules import CondOT, Cosine, Polynomial

F64 = torch.float64

MANIFOLDS = {
    "euclidean": lambda: Euclidean(3),
    "sphere": lambda: Sphere(2),
    "sphere3": lambda: Sphere(3),
    "torus": lambda: FlatTorus(3),
    "poincare": lambda: PoincareBall(3, base_scale=0.8),
    "poincare_c": lambda: PoincareBall(2, c=0.5),
    "lorentz": lambda: Lorentz(3, base_scale=0.8),
    "simplex": lambda: Simplex(4),
    "product": lambda: Product([Sphere(2), FlatTorus(1), PoincareBall(2, base_scale=0.7)]),
}
SCHEDULES = {"condot": CondOT(), "cosine": Cosine(), "poly2": Polynomial(2)}


def endpoints(m: Manifold, n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x_0 = m.random_base(n, generator=g, dtype=F64)
    x_1 = m.random_base(n, generator=g, dtype=F64)
    if isinstance(m, Simplex):  # keep clear of the boundary, where sqrt(x) loses its derivative
        x_0, x_1 = 0.8 * x_0 + 0.2 / 4, 0.8 * x_1 + 0.2 / 4
    return x_0, x_1


def ambient_difference(m: Manifold, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a - b in ambient coordinates; angles on the torus differ modulo 2 pi."""
    if isinstance(m, FlatTorus):
        return wrap(a - b)
    if isinstance(m, Product):
        parts = zip(m.factors, a.split(m._ambient, -1), b.split(m._ambient, -1), strict=True)
        return torch.cat([ambient_difference(f, p, q) for f, p, q in parts], dim=-1)
    return a - b


@pytest.fixture(params=sorted(MANIFOLDS))
def manifold(request) -> Manifold:
    return MANIFOLDS[request.param]()


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_velocity_matches_central_differences_of_x_t(manifold, schedule):
    """dx_t = d/dt x_t in ambient coordinates (float64, h = 1e-5: error O(h^2) + O(eps / h) ~ 1e-10)."""
    path = GeodesicPath(manifold, SCHEDULES[schedule])
    x_0, x_1 = endpoints(manifold)
    t = torch.linspace(0.05, 0.9, x_0.shape[0], dtype=F64)
    h = 1e-5
    out = path.sample(x_0, x_1, t)
    fd = ambient_difference(manifold, path.sample(x_0, x_1, t + h).x_t, path.sample(x_0, x_1, t - h).x_t) / (2 * h)
    scale = 1 + out.dx_t.abs().amax(-1, keepdim=True)
    assert ((out.dx_t - fd).abs() / scale).max() < 1e-6
    # the velocity is tangent at x_t and the point stays on the manifold
    assert manifold.belongs(out.x_t).all()
    torch.testing.assert_close(manifold.proju(out.x_t, out.dx_t), out.dx_t, rtol=1e-9, atol=1e-9)


def test_endpoints(manifold):
    path = GeodesicPath(manifold)
    x_0, x_1 = endpoints(manifold)
    n = x_0.shape[0]
    start = path.sample(x_0, x_1, torch.zeros(n, dtype=F64))
    torch.testing.assert_close(start.x_t, x_0, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(start.dx_t, manifold.logmap(x_0, x_1), rtol=1e-12, atol=1e-12)
    end = path.sample(x_0, x_1, torch.full((n,), 1 - 1e-9, dtype=F64))
    torch.testing.assert_close(ambient_difference(manifold, end.x_t, x_1), torch.zeros_like(x_1), rtol=0, atol=1e-7)
    assert start.x_0 is x_0 and start.x_1 is x_1


def test_condot_speed_is_constant_and_equals_the_distance(manifold):
    path = GeodesicPath(manifold)
    x_0, x_1 = endpoints(manifold)
    t = torch.linspace(0.0, 0.95, x_0.shape[0], dtype=F64)
    out = path.sample(x_0, x_1, t)
    torch.testing.assert_close(manifold.norm(out.x_t, out.dx_t), manifold.dist(x_0, x_1), rtol=1e-8, atol=1e-9)
    # x_t splits the geodesic in the ratio t : (1 - t)
    torch.testing.assert_close(manifold.dist(x_0, out.x_t), t * manifold.dist(x_0, x_1), rtol=1e-8, atol=1e-9)


def test_euclidean_geodesic_path_is_the_condot_affine_path():
    x_0, x_1 = endpoints(Euclidean(3))
    t = torch.rand(x_0.shape[0], generator=torch.Generator().manual_seed(1), dtype=F64) * 0.99
    geo = GeodesicPath(Euclidean(3)).sample(x_0, x_1, t)
    aff = AffinePath(CondOT()).sample(x_0, x_1, t)
    torch.testing.assert_close(geo.x_t, aff.x_t)
    torch.testing.assert_close(geo.dx_t, aff.dx_t)


def test_sphere_path_is_the_slerp():
    """Closed form on the sphere: x_t = sin((1-t) w) / sin w x_0 + sin(t w) / sin w x_1, w = angle(x_0, x_1)."""
    s = Sphere(2)
    x_0, x_1 = endpoints(s)
    t = torch.linspace(0.0, 0.9, x_0.shape[0], dtype=F64)
    w = torch.arccos((x_0 * x_1).sum(-1)).unsqueeze(-1)
    tt = t.unsqueeze(-1)
    slerp = (torch.sin((1 - tt) * w) * x_0 + torch.sin(tt * w) * x_1) / torch.sin(w)
    torch.testing.assert_close(GeodesicPath(s).sample(x_0, x_1, t).x_t, slerp, rtol=1e-9, atol=1e-9)


def test_torus_path_takes_the_short_way_around():
    m = FlatTorus(1)
    x_0 = torch.tensor([[3.0]], dtype=F64)
    x_1 = torch.tensor([[-3.0]], dtype=F64)
    out = GeodesicPath(m).sample(x_0, x_1, torch.tensor([0.5], dtype=F64))
    torch.testing.assert_close(out.x_t, torch.tensor([[-math.pi]], dtype=F64))
    torch.testing.assert_close(out.dx_t, torch.tensor([[2 * math.pi - 6.0]], dtype=F64))


def test_float32_follows_the_input():
    s = Sphere(2)
    g = torch.Generator().manual_seed(0)
    x_0, x_1 = s.random_base(8, generator=g), s.random_base(8, generator=g)
    out = GeodesicPath(s).sample(x_0, x_1, torch.full((8,), 0.3))
    assert out.x_t.dtype == torch.float32 and out.dx_t.dtype == torch.float32
    assert s.belongs(out.x_t).all()


def test_bad_input_raises_naming_the_argument():
    s = Sphere(2)
    path = GeodesicPath(s)
    x_0, x_1 = endpoints(s, 4)
    with pytest.raises(ValueError, match=r"^t:"):
        path.sample(x_0, x_1, torch.ones(4, dtype=F64))  # the velocity is undefined at t = 1
    with pytest.raises(ValueError, match=r"^t:"):
        path.sample(x_0, x_1, torch.full((4,), 1.5, dtype=F64))
    with pytest.raises(ValueError, match=r"^t:"):
        path.sample(x_0, x_1, torch.tensor(0.5, dtype=F64))
    with pytest.raises(ValueError, match=r"^x_0:"):
        path.sample(2 * x_0, x_1, torch.zeros(4, dtype=F64))
    with pytest.raises(ValueError, match=r"^x_1:"):
        path.sample(x_0, x_1[:, :2], torch.zeros(4, dtype=F64))
    with pytest.raises(ValueError, match="batch"):
        path.sample(x_0, x_1[:3], torch.zeros(4, dtype=F64))
    with pytest.raises(ValueError, match=r"^manifold:"):
        GeodesicPath("sphere")
    with pytest.raises(ValueError, match=r"^schedule:"):
        GeodesicPath(s, "condot")
