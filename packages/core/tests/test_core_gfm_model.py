"""GFM model and objectives: identity at s = t, on-manifold outputs, analytic flow maps (sphere rotation, torus
translation), JVP vs finite differences, the flat-chart limit of the G-objectives, likelihood of the zero field."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import flowlab.core.gfm.evaluate as gfm_evaluate
from flowlab.core.flowmaps import ParametrisedFlowMap
from flowlab.core.gfm import build_flow_map, evaluate_nll, gfm_loss, sample
from flowlab.core.grids import uniform
from flowlab.core.likelihood import log_likelihood
from flowlab.core.losses.flow_map import esd_loss, lsd_loss, meanflow_loss, psd_loss
from flowlab.core.manifolds import Euclidean, FlatTorus, PoincareBall, Sphere


@pytest.fixture(autouse=True)
def _single_thread():
    """Two torch threads on the shared, loaded 2-core machine are several times slower than one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


MANIFOLDS = {"sphere": Sphere(2), "torus": FlatTorus(2), "disk": PoincareBall(2)}


def _points(manifold, n, seed):
    return manifold.random_base(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _times(n, seed):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.rand(n, generator=g, dtype=torch.float64), torch.rand(n, generator=g, dtype=torch.float64)
    return torch.minimum(a, b) * 0.99, torch.maximum(a, b) * 0.99


@pytest.mark.parametrize("name", list(MANIFOLDS))
def test_identity_at_equal_times_and_outputs_on_manifold(name):
    m = MANIFOLDS[name]
    torch.manual_seed(0)
    fm = build_flow_map(m, hidden=(32, 32)).double()
    x = _points(m, 64, 1)
    s, t = _times(64, 2)
    assert torch.allclose(fm(x=x, s=s, t=s), x, rtol=0, atol=1e-15)  # X_{s,s} = Id up to round-off (renormalising)
    y = fm(x=x, s=s, t=t)
    assert not torch.allclose(y, x)
    if name == "sphere":
        assert float((y.detach().norm(dim=-1) - 1).abs().max()) < 1e-6
    elif name == "torus":
        assert bool(((y >= -math.pi) & (y < math.pi)).all())
    else:
        assert float(y.norm(dim=-1).max()) < 1


def _rotate(x, omega, angle):
    """Rodrigues: rotate x: (B, 3) about the unit axis of omega by angle: (B,)."""
    k = omega / omega.norm()
    c, s = angle.cos()[:, None], angle.sin()[:, None]
    return x * c + torch.cross(k.expand_as(x), x, dim=-1) * s + k * (x @ k)[:, None] * (1 - c)


class RotationNet(nn.Module):
    """The exact flow-map velocity of v(x) = ω × x: v_{s,t}(x) = log_x(R_{(t−s)|ω|} x) / (t − s), ω × x at s = t."""

    def __init__(self, omega, bias=None):
        super().__init__()
        self.omega, self.bias, self.sphere = omega, bias, Sphere(2)

    def forward(self, *, x, s, t):
        gap = (t - s)[:, None]
        safe = torch.where(gap == 0, torch.ones_like(gap), gap)
        jump = self.sphere.logmap(x, _rotate(x, self.omega, (t - s) * self.omega.norm())) / safe
        v = torch.where(gap == 0, torch.cross(self.omega.expand_as(x), x, dim=-1), jump)
        return v if self.bias is None else v + self.bias


def test_rotation_flow_map_has_zero_distillation_losses_and_perturbed_one_does_not():
    m = Sphere(2)
    omega = torch.tensor([0.3, -0.5, 1.1], dtype=torch.float64)
    exact = ParametrisedFlowMap(RotationNet(omega), manifold=m)
    x, (s, t) = _points(m, 128, 3), _times(128, 4)
    end = exact(x=x, s=s, t=t)
    assert torch.allclose(end, _rotate(x, omega, (t - s) * omega.norm()), atol=1e-10)
    for loss in (lsd_loss, esd_loss, psd_loss):
        assert float(loss(exact, x, s, t, manifold=m)) < 1e-12, loss.__name__
    # MeanFlow with the marginal velocity ω × x: exact on the equator (rotation along geodesics)
    axis = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    equator = ParametrisedFlowMap(RotationNet(axis), manifold=m)
    phi = torch.linspace(-3, 3, 128, dtype=torch.float64)
    xe = torch.stack([phi.cos(), phi.sin(), torch.zeros_like(phi)], -1)
    ue = torch.cross(axis.expand_as(xe), xe, dim=-1)
    assert float(meanflow_loss(equator, xe, s, t, ue, manifold=m)) < 1e-12
    bias = torch.tensor([0.05, 0.02, -0.04], dtype=torch.float64)
    perturbed = ParametrisedFlowMap(RotationNet(omega, bias), manifold=m)
    for loss in (lsd_loss, esd_loss, psd_loss):
        assert float(loss(perturbed, x, s, t, manifold=m)) > 1e-6, loss.__name__


def test_teacher_distillation_targets_come_from_the_teacher_and_train_only_the_student():
    m = Sphere(2)
    omega = torch.tensor([0.3, -0.5, 1.1], dtype=torch.float64)
    exact = ParametrisedFlowMap(RotationNet(omega), manifold=m)
    x_0, x_1 = _points(m, 64, 5), _points(m, 64, 6)

    def loss(student, objective, teacher):
        return gfm_loss(student, x_0, x_1, objective=objective, manifold=m, teacher=teacher,
                        generator=torch.Generator().manual_seed(7))  # fmt: skip

    for objective in ("lsd", "esd"):  # the exact map of the teacher's own field: both terms vanish
        assert float(loss(exact, objective, exact.diagonal_field).loss) < 1e-12, objective
        other = ParametrisedFlowMap(RotationNet(omega * 1.2), manifold=m).diagonal_field
        out = loss(exact, objective, other)  # a teacher of another field: neither term does
        assert float(out.logs["rfm"]) > 1e-3 and float(out.logs["sd"]) > 1e-3, objective
    torch.manual_seed(0)
    student = build_flow_map(m, hidden=(32, 32)).double()
    # the student's own diagonal as the teacher: the SD term is self-distillation's, the diagonal term is zero
    own, self_distilled = loss(student, "lsd", student.diagonal_field), loss(student, "lsd", None)
    assert float(own.logs["rfm"]) < 1e-30 and float(self_distilled.logs["rfm"]) > 1e-3
    torch.testing.assert_close(own.logs["sd"], self_distilled.logs["sd"], rtol=0, atol=0)
    torch.manual_seed(1)
    teacher = build_flow_map(m, hidden=(32, 32)).double()
    loss(student, "lsd", teacher.diagonal_field).loss.backward()
    assert all(p.grad is None for p in teacher.parameters())
    assert all(p.grad is not None for p in student.parameters())
    for objective in ("psd", "mf", "rfm"):
        with pytest.raises(ValueError, match="teacher"):
            loss(student, objective, teacher.diagonal_field)
    with pytest.raises(ValueError, match="teacher"):
        loss(student, "lsd", "rfm")


class ConstantNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, *, x, s, t):
        return self.c.expand_as(x)


def test_torus_constant_field_map_and_semigroup():
    m = FlatTorus(2)
    c = torch.tensor([2.5, -4.0], dtype=torch.float64)
    fm = ParametrisedFlowMap(ConstantNet(c), manifold=m)
    x, (s, t) = _points(m, 64, 5), _times(64, 6)
    u = 0.5 * (s + t)
    want = torch.remainder(x + (t - s)[:, None] * c + math.pi, 2 * math.pi) - math.pi
    assert torch.allclose(fm(x=x, s=s, t=t), want, atol=1e-12)
    two = fm(x=fm(x=x, s=s, t=u), s=u, t=t)
    assert float(m.dist(two, fm(x=x, s=s, t=t)).max()) < 1e-12
    for loss in (lsd_loss, esd_loss, psd_loss):
        assert float(loss(fm, x, s, t, manifold=m)) < 1e-20


def test_jvp_time_derivatives_match_finite_differences():
    m = Sphere(2)
    torch.manual_seed(1)
    fm = build_flow_map(m, hidden=(32, 32)).double()
    x, (s, t) = _points(m, 16, 7), _times(16, 8)
    _, d_t = torch.func.jvp(lambda tau: fm(x=x, s=s, t=tau), (t,), (torch.ones_like(t),))
    _, d_s = torch.func.jvp(lambda sig: fm(x=x, s=sig, t=t), (s,), (torch.ones_like(s),))
    h = 1e-5
    fd_t = (fm(x=x, s=s, t=t + h) - fm(x=x, s=s, t=t - h)) / (2 * h)
    fd_s = (fm(x=x, s=s + h, t=t) - fm(x=x, s=s - h, t=t)) / (2 * h)
    assert torch.allclose(d_t, fd_t, atol=1e-6) and torch.allclose(d_s, fd_s, atol=1e-6)


class ChartNet(nn.Module):
    """A sphere field that is a given flat 2-D field in the orthographic chart of the north-pole cap of radius ε:
    x = (ε y, sqrt(1 − ε²|y|²)) and v = ε (f(y), 0)."""

    def __init__(self, flat, eps):
        super().__init__()
        self.flat, self.eps = flat, eps

    def forward(self, *, x, s, t):
        f = self.flat(x=x[:, :2] / self.eps, s=s, t=t)
        return self.eps * torch.cat([f, torch.zeros_like(f[:, :1])], dim=-1)


def _chart(y, eps):
    return torch.cat([eps * y, (1 - eps**2 * y.pow(2).sum(-1, keepdim=True)).sqrt()], -1)


def test_objectives_reduce_to_euclidean_exactly_on_flat_spaces_and_in_the_sphere_chart_limit():
    torch.manual_seed(2)
    net = build_flow_map(Euclidean(2), hidden=(32, 32)).double().net
    flat = ParametrisedFlowMap(net)
    y, (s, t) = 0.3 * torch.randn(64, 2, dtype=torch.float64), _times(64, 9)
    losses = (lsd_loss, esd_loss, psd_loss)
    want = {f: float(f(flat, y, s, t)) for f in losses}
    for m in (Euclidean(2), FlatTorus(2)):  # torus: points and jumps stay away from the seam
        fm = ParametrisedFlowMap(net, manifold=m)
        for f in losses:
            assert math.isclose(float(f(fm, y, s, t, manifold=m)), want[f], rel_tol=1e-12), (m, f.__name__)
    gaps = {}
    for eps in (0.1, 0.05):
        fm = ParametrisedFlowMap(ChartNet(net, eps), manifold=Sphere(2))
        x = _chart(y, eps)
        gaps[eps] = max(abs(float(f(fm, x, s, t, manifold=Sphere(2))) / eps**2 / want[f] - 1) for f in losses)
    assert gaps[0.05] < 0.02
    assert gaps[0.05] < gaps[0.1] / 3  # shrinks like ε²


@pytest.mark.parametrize("name, log_volume", [("sphere", math.log(4 * math.pi)), ("torus", 2 * math.log(2 * math.pi))])
def test_zero_field_likelihood_is_the_uniform_density(name, log_volume):
    m = MANIFOLDS[name]
    fm = build_flow_map(m, hidden=(16,)).double()
    with torch.no_grad():
        for p in fm.net.mlp.out.parameters():
            p.zero_()
    nll = evaluate_nll(fm, _points(m, 32, 10), manifold=m, steps=4)
    assert torch.allclose(nll, torch.full_like(nll, log_volume), atol=1e-10)


def test_likelihood_builds_no_graph_to_the_parameters(monkeypatch):
    """evaluate_nll runs the divergence without an outer autograd graph (one kept every step's activations alive and
    ran the full T⁷ config out of memory), and gives the NLL the core call gives with autograd on."""
    m = Sphere(2)
    fm = build_flow_map(m, hidden=(16,)).double()
    x = _points(m, 16, 3)
    seen = []

    def spy(*args, **kwargs):
        res = log_likelihood(*args, **kwargs)
        seen.append(res.log_prob.requires_grad)
        return res

    monkeypatch.setattr(gfm_evaluate, "log_likelihood", spy)
    nll = evaluate_nll(fm, x, manifold=m, steps=4)
    assert seen == [False]
    grid = uniform(4, dtype=x.dtype).flip(0)
    ref = log_likelihood(fm.diagonal_field, x, grid=grid, method="rk4", manifold=m, enable_grad=True).log_prob
    assert ref.requires_grad
    torch.testing.assert_close(nll, -ref.detach(), rtol=0, atol=1e-12)


def test_bad_inputs_raise_errors_naming_the_argument():
    m = Sphere(2)
    fm = build_flow_map(m, hidden=(16,))
    x = m.random_base(8)
    s = t = torch.zeros(8)
    with pytest.raises(ValueError, match="x"):
        fm(x=2 * x, s=s, t=t)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        fm(x=bad, s=s, t=t)
    with pytest.raises(ValueError, match="x_1"):
        gfm_loss(fm, x, 2 * x, objective="lsd", manifold=m)
    with pytest.raises(ValueError, match="objective"):
        gfm_loss(fm, x, x, objective="nope", manifold=m)
    with pytest.raises(ValueError, match="nfe"):
        sample(fm, 4, manifold=m, nfe=0)
    with pytest.raises(ValueError, match="x_0"):
        sample(fm, 4, manifold=m, nfe=2, x_0=torch.full((4, 3), 0.1))
