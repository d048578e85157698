"""Flow maps and the flow-map objectives, checked against exact maps (Gaussian-to-Gaussian, sphere rotations)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from flowlab.core.flowmaps import (
    AnchoredFlowMap,
    FlowMapFromField,
    ParametrisedFlowMap,
    diagonal_velocity,
    flow_map_ends,
    sample_time_pairs,
)
from flowlab.core.losses.flow_map import (
    consistency_loss,
    diagonal_fm_loss,
    esd_loss,
    lsd_loss,
    meanflow_loss,
    meanflow_target,
    psd_loss,
)
from flowlab.core.manifolds import Euclidean, FlatTorus, Sphere
from flowlab.core.paths.affine import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import sample_flow_map
from flowlab.core.testing.analytic import GaussianToGaussian

F64 = torch.float64


@pytest.fixture(autouse=True)
def _one_thread():
    """Every tensor here is tiny: intra-op threads only add contention on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _problem() -> GaussianToGaussian:
    """N((0, 0), diag(1, 1)) -> N((1.5, -0.5), diag(0.25, 2)) under CondOT: commuting covariances."""
    v = lambda *a: torch.tensor(a, dtype=F64)  # noqa: E731
    return GaussianToGaussian(v(0.0, 0.0), v(1.0, 1.0), v(1.5, -0.5), v(0.25, 2.0))


def _pairs(n: int, seed: int, *, min_gap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    s = 0.9 * torch.rand(n, generator=g, dtype=F64)
    t = s + min_gap + (1.0 - min_gap - s) * torch.rand(n, generator=g, dtype=F64)
    return s, t.clamp(max=1.0)


def _points(problem: GaussianToGaussian, s: torch.Tensor, seed: int) -> torch.Tensor:
    return problem.sample(s, generator=torch.Generator().manual_seed(seed)).x_t


class AnalyticNet(nn.Module):
    """v_{s,t} of the exact map, (X_{s,t}(x) - x) / (t - s), and the exact velocity on the diagonal; `eps` adds a
    smooth perturbation 0.3 eps sin(2 x + 3 s - t)."""

    def __init__(self, problem: GaussianToGaussian, eps: float = 0.0) -> None:
        super().__init__()
        self.problem, self.eps = problem, eps

    def forward(self, *, x, s, t):
        gap = (t - s)[:, None]
        off = (self.problem.flow_map(x, s, t) - x) / torch.where(gap > 0, gap, torch.ones_like(gap))
        v = torch.where(gap > 0, off, self.problem.velocity(x, t))
        return v + 0.3 * self.eps * torch.sin(2 * x + 3 * s[:, None] - t[:, None])


class TwoTimeMLP(nn.Module):
    def __init__(self, dim: int, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 2, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.out = nn.Linear(hidden, dim)

    def forward(self, *, x, s, t):
        flat = x.flatten(1)
        h = self.net(torch.cat([flat, s[:, None].to(x), t[:, None].to(x)], dim=1))
        return self.out(h).reshape(x.shape)


# ---------------------------------------------------------------------------------------------------------------
# the analytic map and the parametrisation


def test_analytic_map_identity_and_semigroup():
    problem = _problem()
    s, t = _pairs(64, 0)
    u = s + (t - s) * torch.rand(64, generator=torch.Generator().manual_seed(1), dtype=F64)
    x = _points(problem, s, 2)
    torch.testing.assert_close(problem.flow_map(x, s, s), x, atol=1e-12, rtol=0)
    torch.testing.assert_close(problem.flow_map(problem.flow_map(x, s, u), u, t), problem.flow_map(x, s, t))
    # d/dt X_{s,t}(x) = v(X_{s,t}(x), t) by central differences (independent of the JVP machinery)
    h = 1e-5
    s_, t_ = s, t.clamp(h, 1 - h)
    fd = (problem.flow_map(x, s_, t_ + h) - problem.flow_map(x, s_, t_ - h)) / (2 * h)
    torch.testing.assert_close(fd, problem.velocity(problem.flow_map(x, s_, t_), t_), atol=1e-7, rtol=1e-7)


def test_parametrised_map_is_identity_on_the_diagonal_euclidean():
    torch.manual_seed(0)
    net = TwoTimeMLP(2 * 3 * 3).double()

    class ImageNet(nn.Module):  # (B, 2, 3, 3) events through the flat MLP
        def forward(self, *, x, s, t):
            return net(x=x.flatten(1), s=s, t=t).reshape(x.shape)

    flow_map = ParametrisedFlowMap(ImageNet())
    x = torch.randn(5, 2, 3, 3, dtype=F64)
    s = torch.rand(5, dtype=F64)
    assert torch.equal(flow_map(x=x, s=s, t=s), x)
    t = (s + 0.3).clamp(max=1.0)
    expected = x + (t - s)[:, None, None, None] * flow_map.velocity(x=x, s=s, t=t)
    torch.testing.assert_close(flow_map(x=x, s=s, t=t), expected)
    torch.testing.assert_close(flow_map.diagonal_field(x=x, t=s), flow_map.velocity(x=x, s=s, t=s))


def test_parametrised_map_on_the_sphere_stays_on_the_sphere():
    torch.manual_seed(0)
    sphere = Sphere(2)
    flow_map = ParametrisedFlowMap(TwoTimeMLP(3).double(), manifold=sphere)
    x = sphere.random_uniform(64, generator=torch.Generator().manual_seed(3), dtype=F64)
    s, t = _pairs(64, 4)
    torch.testing.assert_close(flow_map(x=x, s=s, t=s), x, atol=1e-14, rtol=0)
    y = flow_map(x=x, s=s, t=t)
    assert float((y.detach().norm(dim=-1) - 1).abs().max()) < 1e-12
    v = flow_map.velocity(x=x, s=s, t=t)
    assert float((x * v).sum(-1).abs().max()) < 1e-12  # tangent at x
    assert float((y - x).norm(dim=-1).min()) > 1e-3  # it does move off the diagonal


def test_diagonal_velocity_by_jvp_matches_the_exact_velocity():
    problem = _problem()
    t = torch.rand(32, generator=torch.Generator().manual_seed(5), dtype=F64)
    x = _points(problem, t, 6)
    # problem.flow_map has no `.velocity`: the instantaneous velocity comes from a JVP in the end time
    got = diagonal_velocity(problem.flow_map, x=x, t=t)
    torch.testing.assert_close(got, problem.velocity(x, t), atol=1e-12, rtol=1e-10)


# ---------------------------------------------------------------------------------------------------------------
# every objective vanishes at the exact map and not at a perturbed one


def _all_losses(flow_map, problem, x_s, s, t, *, teacher_field, teacher_map):
    path = AffinePath(CondOT())
    g = torch.Generator().manual_seed(11)
    x_0, x_1 = problem.sample_source(len(s), generator=g), problem.sample_data(len(s), generator=g)
    s_next = (s + 0.1).clamp(max=1.0)
    keep = s_next > s
    return {
        "lsd": lsd_loss(flow_map, x_s, s, t, teacher=teacher_field),
        "esd": esd_loss(flow_map, x_s, s, t, teacher=teacher_field),
        "esd_none": esd_loss(flow_map, x_s, s, t, teacher=teacher_field, stopgrad="none"),
        "psd": psd_loss(flow_map, x_s, s, t),
        "mf": meanflow_loss(flow_map, x_s, s, t, problem.velocity(x_s, s)),
        "cd": consistency_loss(flow_map, x_0[keep], x_1[keep], s[keep], s_next[keep], path=path, teacher=teacher_map),
    }


@pytest.mark.parametrize("self_teacher", [False, True], ids=["external_teacher", "self_distillation"])
def test_flow_map_losses_vanish_at_the_exact_map_and_not_when_perturbed(self_teacher):
    problem = _problem()
    s, t = _pairs(128, 7, min_gap=0.02)
    x_s = _points(problem, s, 8)
    exact_map = problem.flow_map
    teacher = None if self_teacher else problem.velocity

    exact = _all_losses(
        ParametrisedFlowMap(AnalyticNet(problem)), problem, x_s, s, t, teacher_field=teacher, teacher_map=exact_map
    )
    perturbed = _all_losses(
        ParametrisedFlowMap(AnalyticNet(problem, eps=1.0)),
        problem,
        x_s,
        s,
        t,
        teacher_field=teacher,
        teacher_map=exact_map,
    )
    for name in exact:
        assert float(exact[name]) < 1e-6 * 1e-6, (name, float(exact[name]))
        assert float(perturbed[name]) > 1e-3, (name, float(perturbed[name]))


def test_losses_accept_a_plain_exact_map_callable():
    problem = _problem()
    s, t = _pairs(64, 9)
    x_s = _points(problem, s, 10)
    v = problem.velocity
    assert float(lsd_loss(problem.flow_map, x_s, s, t, teacher=v)) < 1e-12
    assert float(lsd_loss(problem.flow_map, x_s, s, t)) < 1e-12  # teacher: the map's own diagonal via JVP
    assert float(esd_loss(problem.flow_map, x_s, s, t, teacher=v)) < 1e-12
    assert float(psd_loss(problem.flow_map, x_s, s, t)) < 1e-12


def test_meanflow_target_equals_the_exact_average_velocity():
    problem = _problem()
    s, t = _pairs(128, 12, min_gap=0.05)
    x_s = _points(problem, s, 13)
    out = meanflow_target(ParametrisedFlowMap(AnalyticNet(problem)), x_s, s, t, problem.velocity(x_s, s))
    average = (problem.flow_map(x_s, s, t) - x_s) / (t - s)[:, None]
    torch.testing.assert_close(out.target, average, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(out.velocity, average, atol=1e-10, rtol=1e-10)
    # a model that is off by a constant gets a target that points back toward the average velocity
    shifted = ParametrisedFlowMap(AnalyticNet(problem, eps=0.5))
    wrong = meanflow_target(shifted, x_s, s, t, problem.velocity(x_s, s))
    assert float((wrong.velocity - average).norm()) > 10 * 1e-3
    assert not wrong.target.requires_grad


def test_meanflow_target_with_conditional_velocities_is_unbiased():
    """The target is affine in u_cond = dx_s, so averaging it over x_1 | x_s gives the marginal target."""
    problem = _problem()
    s, t = torch.full((1,), 0.3, dtype=F64), torch.full((1,), 0.8, dtype=F64)
    x_s = torch.tensor([[0.4, -0.2]], dtype=F64)
    flow_map = ParametrisedFlowMap(AnalyticNet(problem))
    # x_1 | x_s for CondOT independent Gaussians: x_s = (1-s) x_0 + s x_1, so x_1 | x_s is Gaussian per coordinate
    c0, c1 = torch.tensor([1.0, 1.0], dtype=F64), torch.tensor([0.25, 2.0], dtype=F64)
    m1 = torch.tensor([1.5, -0.5], dtype=F64)
    var_s = (1 - s) ** 2 * c0 + s**2 * c1
    gain = s * c1 / var_s
    mean_1 = m1 + gain * (x_s[0] - s * m1)
    std_1 = torch.sqrt(c1 - gain * s * c1)
    n = 4000
    x_1 = mean_1 + std_1 * torch.randn(n, 2, generator=torch.Generator().manual_seed(14), dtype=F64)
    x_0 = (x_s - s * x_1) / (1 - s)
    dx = x_1 - x_0
    rep = lambda a: a.expand(n, *a.shape[1:])  # noqa: E731
    targets = meanflow_target(flow_map, rep(x_s), rep(s), rep(t), dx).target
    average = (problem.flow_map(x_s, s, t) - x_s) / (t - s)
    se = targets.std(0) / math.sqrt(n)
    assert bool(((targets.mean(0) - average[0]).abs() < 5 * se).all())


def test_jvp_derivatives_match_central_differences():
    """LSD and ESD residuals from their JVPs equal finite-difference derivatives of a random network map."""
    torch.manual_seed(0)
    flow_map = ParametrisedFlowMap(TwoTimeMLP(2).double())
    problem = _problem()
    s, t = _pairs(16, 15, min_gap=0.1)
    s, t = s.clamp(1e-3, 0.8), t.clamp(max=0.99)
    x = _points(problem, s, 16)
    teacher = problem.velocity
    h = 1e-5

    def X(x_, s_, t_):
        return flow_map(x=x_, s=s_, t=t_)

    d_t = (X(x, s, t + h) - X(x, s, t - h)) / (2 * h)
    want_lsd = (d_t - teacher(X(x, s, t), t)).pow(2).sum(-1)
    got_lsd = lsd_loss(flow_map, x, s, t, teacher=teacher, reduction="none")
    torch.testing.assert_close(got_lsd, want_lsd, rtol=1e-6, atol=1e-9)

    v = teacher(x, s)
    d_s = (X(x, s + h, t) - X(x, s - h, t)) / (2 * h)
    push = (X(x + h * v, s, t) - X(x - h * v, s, t)) / (2 * h)
    want_esd = (d_s + push).pow(2).sum(-1)
    for mode in ("pushforward", "none"):
        got_esd = esd_loss(flow_map, x, s, t, teacher=teacher, stopgrad=mode, reduction="none")
        torch.testing.assert_close(got_esd, want_esd, rtol=1e-6, atol=1e-9)


def test_lsd_finite_difference_derivative_matches_the_jvp():
    """`derivative="fd"` (central difference, h = 1e-3): in float64 its per-sample LSD residual and its gradient
    match the JVP's (1e-5 relative on central rows, 1e-3 on the rows one-sided at t = 1 and t = s, where the
    stacked call clamps t + h to 1 and t − h to s); in float32 on the flat torus (wrapped differences through the
    log map, the quick GFM network with its time scale 100) to 1e-2. `"fd_forward"` (the forward difference,
    O(h)): to 1e-3 in float64 (gradient 2e-3 in norm; 7e-5 and 4e-4 measured) and 3e-2 in float32 (1.5e-2
    measured); it is not the central difference inside (0, 1), and at t = 1 and t = s both are the same
    one-sided difference."""
    torch.manual_seed(0)
    flow_map = ParametrisedFlowMap(TwoTimeMLP(2).double())
    problem = _problem()
    s, t = _pairs(16, 15, min_gap=0.0)
    t = torch.cat([t[:-2], torch.tensor([1.0, 0.4], dtype=F64)])  # a row at t = 1 and one at t = s
    s = torch.cat([s[:-2], torch.tensor([0.2, 0.4], dtype=F64)])
    x = _points(problem, s, 16)
    grads = {}
    for mode in ("jvp", "fd", "fd_forward"):
        flow_map.zero_grad()
        loss = lsd_loss(flow_map, x, s, t, teacher=problem.velocity, reduction="none", derivative=mode)
        loss[:-2].sum().backward()  # the gradient of the central rows
        grads[mode] = (loss.detach(), torch.cat([p.grad.flatten() for p in flow_map.parameters()]))
    (fd, fd_grad), (jvp, jvp_grad), (fwd, fwd_grad) = grads["fd"], grads["jvp"], grads["fd_forward"]
    torch.testing.assert_close(fd[:-2], jvp[:-2], rtol=1e-5, atol=1e-8)  # central: O(h²)
    torch.testing.assert_close(fd[-2:], jvp[-2:], rtol=1e-3, atol=1e-8)  # one-sided at t = 1 and t = s: O(h)
    assert float((fd[-2:] - jvp[-2:]).abs().max()) > 1e-9  # they are one-sided, not central past the bounds
    torch.testing.assert_close(fd_grad, jvp_grad, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(fwd, jvp, rtol=1e-3, atol=1e-8)  # forward: O(h)
    assert float((fwd_grad - jvp_grad).norm() / jvp_grad.norm()) < 2e-3
    assert float(((fwd[:-2] - fd[:-2]) / fd[:-2]).abs().max()) > 1e-6  # not the central difference
    torch.testing.assert_close(fwd[-2:], fd[-2:], rtol=0, atol=0)  # the same one-sided rows
    edge = torch.tensor([1 - 5e-4], dtype=F64)  # s = t within h of 1: a step of h / 2 to the wider side, never 0
    exact = lsd_loss(flow_map, x[:1], edge, edge, teacher=problem.velocity, reduction="none")
    for mode in ("fd", "fd_forward"):
        got = lsd_loss(flow_map, x[:1], edge, edge, teacher=problem.velocity, reduction="none", derivative=mode)
        torch.testing.assert_close(got, exact, rtol=1e-3, atol=1e-8)

    from flowlab.core.gfm import build_flow_map

    torus = FlatTorus(7)
    fm = build_flow_map(torus, hidden=(128,) * 3)
    g = torch.Generator().manual_seed(1)
    xs = torus.random_base(256, generator=g)
    s32, t32 = _pairs(256, 2, min_gap=0.0)
    s32, t32 = s32.float(), t32.float().clamp(max=1 - 1e-3)
    jvp = lsd_loss(fm, xs, s32, t32, manifold=torus, reduction="none").detach()
    for derivative, tol in (("fd", 1e-2), ("fd_forward", 3e-2)):
        fd = lsd_loss(fm, xs, s32, t32, manifold=torus, reduction="none", derivative=derivative).detach()
        assert float((fd - jvp).abs().max()) < tol * float(jvp.abs().max()), derivative
    with pytest.raises(ValueError, match="derivative"):
        lsd_loss(fm, xs, s32, t32, manifold=torus, derivative="adjoint")
    for derivative in ("fd", "fd_forward"):
        with pytest.raises(ValueError, match="fd_step"):
            lsd_loss(fm, xs, s32, t32, manifold=torus, derivative=derivative, fd_step=0.0)


def test_teacher_terms_carry_no_gradient():
    torch.manual_seed(0)
    flow_map = ParametrisedFlowMap(TwoTimeMLP(2).double())
    problem = _problem()
    s, t = _pairs(32, 17, min_gap=0.05)
    x = _points(problem, s, 18)
    calls = []

    def teacher(*, x, t):
        calls.append(torch.is_grad_enabled())
        return problem.velocity(x, t)

    for loss in (lsd_loss(flow_map, x, s, t, teacher=teacher), esd_loss(flow_map, x, s, t, teacher=teacher)):
        flow_map.zero_grad()
        loss.backward()
        grads = [p.grad for p in flow_map.parameters()]
        assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
        assert sum(float(g.abs().sum()) for g in grads) > 0
    assert calls == [False, False]

    # "pushforward" stops the gradient through dX[v]; "none" keeps it: same value, different gradients
    grads = {}
    for mode in ("pushforward", "none"):
        flow_map.zero_grad()
        esd_loss(flow_map, x, s, t, teacher=problem.velocity, stopgrad=mode).backward()
        grads[mode] = torch.cat([p.grad.flatten() for p in flow_map.parameters()])
    assert float((grads["pushforward"] - grads["none"]).abs().max()) > 1e-6


def test_explicit_euclidean_manifold_equals_flat_default():
    torch.manual_seed(0)
    euclid = Euclidean(2)
    net = TwoTimeMLP(2).double()
    flat, embedded = ParametrisedFlowMap(net), ParametrisedFlowMap(net, manifold=euclid)
    problem = _problem()
    s, t = _pairs(32, 19, min_gap=0.05)
    x = _points(problem, s, 20)
    dx = problem.velocity(x, s)
    for fn in (lsd_loss, esd_loss, psd_loss):
        torch.testing.assert_close(fn(flat, x, s, t), fn(embedded, x, s, t, manifold=euclid))
    torch.testing.assert_close(meanflow_loss(flat, x, s, t, dx), meanflow_loss(embedded, x, s, t, dx, manifold=euclid))
    sample = AffinePath(CondOT()).sample(torch.randn(32, 2, dtype=F64), torch.randn(32, 2, dtype=F64), s)
    torch.testing.assert_close(diagonal_fm_loss(flat, sample), diagonal_fm_loss(embedded, sample, manifold=euclid))


def test_flat_torus_losses_equal_the_flat_losses_away_from_the_seam():
    """FlatTorus: exp = wrap(x + u), proj = Id, flat metric; with points and jumps far from ±π every objective
    (MeanFlow included) equals the flat one."""
    torch.manual_seed(0)
    torus = FlatTorus(2)
    net = TwoTimeMLP(2).double()
    flat, wrapped = ParametrisedFlowMap(net), ParametrisedFlowMap(net, manifold=torus)
    g = torch.Generator().manual_seed(36)
    x = 2 * torch.rand(32, 2, generator=g, dtype=F64) - 1
    dx = torch.randn(32, 2, generator=g, dtype=F64)
    s, t = _pairs(32, 37, min_gap=0.05)
    assert float(flat(x=x, s=s, t=t).abs().max()) < 3.0  # the jumps stay away from the seam
    for fn in (lsd_loss, esd_loss, psd_loss):
        torch.testing.assert_close(fn(wrapped, x, s, t, manifold=torus), fn(flat, x, s, t))
    torch.testing.assert_close(meanflow_loss(wrapped, x, s, t, dx, manifold=torus), meanflow_loss(flat, x, s, t, dx))


def test_parametrised_map_samples_with_sample_flow_map():
    """One-step sampling with the exact map hard-wired into the parametrisation lands on X_{0,1}."""
    problem = _problem()
    x0 = problem.sample_source(64, generator=torch.Generator().manual_seed(38))
    flow_map = ParametrisedFlowMap(AnalyticNet(problem))
    grid = torch.linspace(0, 1, 5, dtype=F64)
    ones, zeros = torch.ones(64, dtype=F64), torch.zeros(64, dtype=F64)
    with torch.inference_mode():
        four = sample_flow_map(flow_map, x0, grid)
    torch.testing.assert_close(four, problem.flow_map(x0, zeros, ones))


# ---------------------------------------------------------------------------------------------------------------
# sphere: the rotation field v(x) = ω × x has the exact map "rotate by (t - s)|ω| about ω"


def _rotate(x: torch.Tensor, omega: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rodrigues: rotate x: (B, 3) about the unit axis of omega by angle: (B,)."""
    k = omega / omega.norm()
    c, s = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
    kx = torch.cross(k.expand_as(x), x, dim=-1)
    return c * x + s * kx + (1 - c) * (x @ k)[:, None] * k


class RotationNet(nn.Module):
    def __init__(self, sphere: Sphere, omega: torch.Tensor, eps: float = 0.0) -> None:
        super().__init__()
        self.sphere, self.omega, self.eps = sphere, omega, eps

    def forward(self, *, x, s, t):
        gap = (t - s)[:, None]
        end = _rotate(x, self.omega, (t - s) * self.omega.norm())
        off = self.sphere.logmap(x, end) / torch.where(gap > 0, gap, torch.ones_like(gap))
        v = torch.where(gap > 0, off, torch.cross(self.omega.expand_as(x), x, dim=-1))
        return v + self.eps * torch.sin(3 * x + s[:, None])


def test_sphere_losses_vanish_at_the_rotation_map_and_not_when_perturbed():
    sphere = Sphere(2)
    omega = torch.tensor([0.3, -1.2, 2.0], dtype=F64)
    x = sphere.random_uniform(64, generator=torch.Generator().manual_seed(21), dtype=F64)
    s, t = _pairs(64, 22, min_gap=0.02)

    def field(*, x, t):
        return torch.cross(omega.expand_as(x), x, dim=-1)

    def losses(eps):
        fm = ParametrisedFlowMap(RotationNet(sphere, omega, eps), manifold=sphere)
        return {
            "lsd": lsd_loss(fm, x, s, t, manifold=sphere),
            "lsd_teacher": lsd_loss(fm, x, s, t, teacher=field, manifold=sphere),
            "esd": esd_loss(fm, x, s, t, manifold=sphere),
            "esd_none": esd_loss(fm, x, s, t, manifold=sphere, stopgrad="none"),
            "psd": psd_loss(fm, x, s, t, manifold=sphere),
        }

    # the integrated teacher map reproduces the rotation (manifold rk4 through FlowMapFromField)
    teacher = FlowMapFromField(field, 16, "rk4", manifold=sphere)
    torch.testing.assert_close(teacher(x=x, s=s, t=t), _rotate(x, omega, (t - s) * omega.norm()), atol=1e-6, rtol=0)

    exact, perturbed = losses(0.0), losses(0.2)
    for name in exact:
        assert float(exact[name]) < 1e-12, (name, float(exact[name]))
        assert float(perturbed[name]) > 1e-4, (name, float(perturbed[name]))


@pytest.mark.parametrize(
    "diag_fraction",
    [
        0.0,
        1.0,
    ],
    ids=["off_diagonal", "diagonal"],
)
def test_sphere_losses_have_finite_gradients_for_a_network(diag_fraction):
    torch.manual_seed(0)
    sphere = Sphere(2)
    flow_map = ParametrisedFlowMap(TwoTimeMLP(3).double(), manifold=sphere)
    x = sphere.random_uniform(32, generator=torch.Generator().manual_seed(23), dtype=F64)
    g = torch.Generator().manual_seed(24)
    pairs = sample_time_pairs(32, diag_fraction=diag_fraction, generator=g, dtype=F64)
    for fn in (lsd_loss, esd_loss, psd_loss):
        flow_map.zero_grad()
        loss = fn(flow_map, x, pairs.s, pairs.t, manifold=sphere)
        loss.backward()
        assert bool(torch.isfinite(loss))
        assert all(bool(torch.isfinite(p.grad).all()) for p in flow_map.parameters()), fn.__name__


# ---------------------------------------------------------------------------------------------------------------
# the teacher map by integration and time pairs


def test_flow_map_from_field_matches_the_exact_map():
    pytest.importorskip("flowlab.core.solvers.ode")
    problem = _problem()
    s, t = _pairs(64, 25)
    x = _points(problem, s, 26)
    exact = problem.flow_map(x, s, t)
    errors = []
    for steps in (4, 8, 16):
        teacher = FlowMapFromField(problem.velocity, steps, "rk4")
        errors.append(float((teacher(x=x, s=s, t=t) - exact).abs().max()))
    assert errors[-1] < 1e-6
    assert errors[0] / errors[1] > 10 and errors[1] / errors[2] > 10  # fourth order: ratio ~ 16
    teacher = FlowMapFromField(problem.velocity, 16, "rk4")
    torch.testing.assert_close(teacher(x=x, s=s, t=s), x)
    torch.testing.assert_close(teacher.velocity(x=x, s=s, t=s), problem.velocity(x, s))


def test_sample_time_pairs_law():
    n = 40_000
    g = torch.Generator().manual_seed(27)
    pairs = sample_time_pairs(n, diag_fraction=0.25, generator=g, dtype=F64)
    s, t, diag = pairs.s, pairs.t, pairs.diagonal
    assert s.shape == t.shape == diag.shape == (n,) and s.dtype == F64
    assert bool((s <= t).all()) and bool((s >= 0).all()) and bool((t <= 1).all())
    assert bool((s[diag] == t[diag]).all())
    frac = float(diag.double().mean())
    assert abs(frac - 0.25) < 5 * math.sqrt(0.25 * 0.75 / n)  # binomial 5-sigma bound
    # off the diagonal: uniform on the triangle {s <= t}: E s = 1/3, E t = 2/3, P(t - s <= 1/2) = 3/4
    s_off, t_off = s[~diag], t[~diag]
    m = s_off.numel()
    assert abs(float(s_off.mean()) - 1 / 3) < 5 * math.sqrt(1 / 18 / m)  # Var s = 1/18
    assert abs(float(t_off.mean()) - 2 / 3) < 5 * math.sqrt(1 / 18 / m)
    p = float(((t_off - s_off) <= 0.5).double().mean())
    assert abs(p - 0.75) < 5 * math.sqrt(0.75 * 0.25 / m)
    # the same generator seed gives the same pairs
    again = sample_time_pairs(n, diag_fraction=0.25, generator=torch.Generator().manual_seed(27), dtype=F64)
    assert torch.equal(again.s, s) and torch.equal(again.t, t)


def test_sample_time_pairs_with_max_gap_and_range():
    n = 40_000
    pairs = sample_time_pairs(
        n, diag_fraction=0.0, max_gap=0.2, high=1 - 1e-3, generator=torch.Generator().manual_seed(28), dtype=F64
    )
    gap = pairs.t - pairs.s
    assert not bool(pairs.diagonal.any())
    assert float(gap.min()) >= 0 and float(gap.max()) <= 0.2 + 1e-12 and float(pairs.t.max()) <= 1 - 1e-3
    # uniform on the band {0 <= t - s <= g} of the triangle of side L: gap density ∝ (L - d) on [0, g]
    L, g = 1 - 1e-3, 0.2
    cdf = lambda d: (L * d - d * d / 2) / (L * g - g * g / 2)  # noqa: E731
    p = float((gap <= 0.1).double().mean())
    assert abs(p - cdf(0.1)) < 5 * math.sqrt(cdf(0.1) * (1 - cdf(0.1)) / n)
    # given the gap, s is uniform on [0, L - gap]: s / (L - gap) has mean 1/2
    ratio = pairs.s / (L - gap)
    assert abs(float(ratio.mean()) - 0.5) < 5 * math.sqrt(1 / 12 / n)


def test_sample_time_pairs_from_the_source():
    """source_fraction p: each off-diagonal pair starts at s = low with probability p, keeping the triangle's gap
    law (density 2 (1 - d): mean 1/3); p = 0 draws exactly the default pairs, p = 1 starts every pair at low."""
    n = 40_000
    default = sample_time_pairs(n, diag_fraction=0.25, generator=torch.Generator().manual_seed(29), dtype=F64)
    zero = sample_time_pairs(
        n, diag_fraction=0.25, source_fraction=0.0, generator=torch.Generator().manual_seed(29), dtype=F64
    )
    assert torch.equal(zero.s, default.s) and torch.equal(zero.t, default.t)
    half = sample_time_pairs(
        n, diag_fraction=0.25, source_fraction=0.5, generator=torch.Generator().manual_seed(29), dtype=F64
    )
    assert torch.equal(half.diagonal, default.diagonal) and bool((half.s[half.diagonal] == half.t[half.diagonal]).all())
    off = ~half.diagonal
    at_source = off & (half.s == 0)
    m, k = int(off.sum()), int(at_source.sum())
    assert abs(k / m - 0.5) < 5 * math.sqrt(0.25 / m)  # binomial 5-sigma bound
    gap = half.t[at_source]
    assert abs(float(gap.mean()) - 1 / 3) < 5 * math.sqrt(1 / 18 / k)  # Var d = 1/18
    moved = at_source & (default.s > 0)  # the pairs that moved keep their gap
    torch.testing.assert_close(half.t[moved], (default.t - default.s)[moved], rtol=0, atol=1e-12)
    every = sample_time_pairs(1000, diag_fraction=0.0, source_fraction=1.0, low=0.2, high=0.9,
                              generator=torch.Generator().manual_seed(3), dtype=F64)  # fmt: skip
    assert bool((every.s == 0.2).all()) and bool((every.t <= 0.9).all()) and bool((every.t >= 0.2).all())
    with pytest.raises(ValueError, match="source_fraction"):
        sample_time_pairs(8, source_fraction=1.5)


# ---------------------------------------------------------------------------------------------------------------
# training smoke test: LSD + diagonal FM learns the 1-D Gaussian flow map


def _train(problem: GaussianToGaussian, *, use_lsd: bool, steps: int = 100, batch: int = 128):
    """Diagonal FM (+ LSD on off-diagonal pairs) on a small MLP; returns the trained map."""
    torch.manual_seed(0)
    flow_map = ParametrisedFlowMap(TwoTimeMLP(1, hidden=32))
    opt = torch.optim.Adam(flow_map.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(29)
    for _ in range(steps):
        pairs = sample_time_pairs(batch, diag_fraction=0.0, generator=g)
        loss = diagonal_fm_loss(flow_map, problem.sample(torch.rand(batch, generator=g), generator=g))
        if use_lsd:
            x_s = problem.sample(pairs.s, generator=g).x_t
            loss = loss + lsd_loss(flow_map, x_s, pairs.s, pairs.t)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return flow_map


def test_lsd_plus_fm_training_learns_the_map_and_its_semigroup():
    """1-D N(0, 1) -> N(2, 0.5²), 100 Adam steps (seeded): FM alone leaves the off-diagonal untrained (semigroup
    defect ~0.4, error of X_{0,1} ~0.9 in mean square); FM + LSD brings both below 0.05 (observed ~0.003, ~0.006)."""
    v = lambda *a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    problem = GaussianToGaussian(v(0.0), v(1.0), v(2.0), v(0.25))
    x0 = problem.sample_source(512, generator=torch.Generator().manual_seed(30))
    zero, half, one = (torch.full((512,), c) for c in (0.0, 0.5, 1.0))

    def defects(flow_map):
        with torch.no_grad():
            direct = flow_map(x=x0, s=zero, t=one)
            two_step = flow_map(x=flow_map(x=x0, s=zero, t=half), s=half, t=one)
            exact = problem.flow_map(x0, zero, one)
            return float((two_step - direct).pow(2).mean()), float((direct - exact).pow(2).mean())

    semigroup_fm, error_fm = defects(_train(problem, use_lsd=False))
    semigroup, error = defects(_train(problem, use_lsd=True))
    assert semigroup < 0.05 and semigroup < 0.1 * semigroup_fm, (semigroup_fm, semigroup)
    assert error < 0.05 and error < 0.1 * error_fm, (error_fm, error)


# ---------------------------------------------------------------------------------------------------------------
# bad inputs


def test_bad_inputs_raise_value_errors_naming_the_argument():
    problem = _problem()
    flow_map = ParametrisedFlowMap(AnalyticNet(problem))
    s, t = _pairs(8, 31, min_gap=0.05)
    x = _points(problem, s, 32)
    path = AffinePath(CondOT())

    def raises(match, fn, *args, **kwargs):
        with pytest.raises(ValueError, match=match):
            fn(*args, **kwargs)

    nan = x.clone()
    nan[0, 0] = float("nan")
    raises("x_s", lsd_loss, flow_map, nan, s, t)
    raises("^s:", lsd_loss, flow_map, x, t, s)  # s > t
    raises("^s:", esd_loss, flow_map, x, s[:4], t)
    raises("^t:", psd_loss, flow_map, x, s, t + 2.0)
    raises("reduction", lsd_loss, flow_map, x, s, t, reduction="avg")
    raises("weight", psd_loss, flow_map, x, s, t, weight=torch.ones(3, dtype=F64))
    raises("stopgrad", esd_loss, flow_map, x, s, t, stopgrad="both")
    raises("manifold", lsd_loss, flow_map, x, s, t, manifold="sphere")
    raises("dx_s", meanflow_loss, flow_map, x, s, t, x[:, :1])
    raises("flow_map", meanflow_loss, problem.flow_map, x, s, t, x)
    raises("flow_map", lsd_loss, 3, x, s, t)
    raises("teacher", psd_loss, flow_map, x, s, t, teacher="ema")
    raises("sample", diagonal_fm_loss, flow_map, (x, s))
    raises("metric", consistency_loss, flow_map, x, x, s, t, path=path, metric="l1")
    raises("s_next", consistency_loss, flow_map, x, x, t, s, path=path)
    raises("huber_c", consistency_loss, flow_map, x, x, s, t, path=path, metric="pseudo_huber", huber_c=-1.0)
    raises("path", consistency_loss, flow_map, x, x, s, t, path=None)
    sphere = Sphere(2)
    on_sphere = ParametrisedFlowMap(TwoTimeMLP(3).double(), manifold=sphere)
    raises("^x:", on_sphere, x=torch.ones(8, 3, dtype=F64), s=s, t=t)
    raises("x_s", lsd_loss, on_sphere, torch.ones(8, 3, dtype=F64), s, t, manifold=sphere)
    raises("net", ParametrisedFlowMap, 3)
    raises("steps", FlowMapFromField, problem.velocity, 0)
    raises("field", FlowMapFromField, None, 4)
    raises("batch", sample_time_pairs, 0)
    raises("diag_fraction", sample_time_pairs, 4, diag_fraction=1.5)
    raises("max_gap", sample_time_pairs, 4, max_gap=0.0)
    raises("low, high", sample_time_pairs, 4, low=0.5, high=0.5)


def test_pseudo_huber_and_reductions():
    problem = _problem()
    s, t = _pairs(16, 33, min_gap=0.05)
    x = _points(problem, s, 34)
    flow_map = ParametrisedFlowMap(AnalyticNet(problem, eps=1.0))
    per = psd_loss(flow_map, x, s, t, reduction="none")
    assert per.shape == (16,)
    torch.testing.assert_close(psd_loss(flow_map, x, s, t), per.mean())
    torch.testing.assert_close(psd_loss(flow_map, x, s, t, reduction="sum"), per.sum())
    w = torch.linspace(0, 1, 16, dtype=F64)
    torch.testing.assert_close(psd_loss(flow_map, x, s, t, weight=w, reduction="sum"), (w * per).sum())
    # pseudo-Huber: sqrt(d² + c²) - c with d² the L2 consistency loss
    path = AffinePath(CondOT())
    g = torch.Generator().manual_seed(35)
    x_0, x_1 = problem.sample_source(16, generator=g), problem.sample_data(16, generator=g)
    s_next = (s + 0.05).clamp(max=1.0)
    l2 = consistency_loss(flow_map, x_0, x_1, s, s_next, path=path, reduction="none")
    hub = consistency_loss(
        flow_map, x_0, x_1, s, s_next, path=path, metric="pseudo_huber", huber_c=0.1, reduction="none"
    )
    torch.testing.assert_close(hub, torch.sqrt(l2 + 0.01) - 0.1)
    assert bool((l2 > 0).all())  # consistency training: the same pair at s_next is not on the exact trajectory


class LinearCorrection(nn.Module):
    """g(x, s, t) = Σ_{k>=2} (t − s)^{k−2} A^k x / k!, the exact correction of an `AnchoredFlowMap` on v = A x:
    then x + τ A x + τ² g = expm(τ A) x. `scale` != 1 perturbs it."""

    def __init__(self, a: torch.Tensor, scale: float = 1.0, terms: int = 30) -> None:
        super().__init__()
        self.a, self.scale, self.terms = a, scale, terms
        self.weight = nn.Parameter(torch.ones((), dtype=a.dtype))  # so that gradients have somewhere to go

    def forward(self, *, x, s, t):
        tau = (t - s)[:, None]
        power, out = x @ self.a.T @ self.a.T / 2, torch.zeros_like(x)  # A² x / 2!
        for k in range(2, self.terms):
            out = out + power
            power = tau * (power @ self.a.T) / (k + 1)
        return self.scale * self.weight * out


def test_anchored_map_is_the_teacher_on_the_diagonal_and_exact_with_the_exact_correction():
    """X_{s,t} = x + τ v_T(x, s) + τ² g: X_{s,s} = Id and v_{t,t} = v_T exactly; with the series correction of a
    linear teacher v = A x it is expm(τ A) x, and the LSD loss (jvp and finite difference) vanishes there and not
    when the correction is 10 % off; only the correction is a parameter or in the state dict."""
    a = torch.tensor([[0.0, -1.3, 0.2], [1.3, -0.2, 0.4], [-0.1, 0.5, -0.6]], dtype=F64)

    def teacher(*, x, t):
        return x @ a.T

    fm = AnchoredFlowMap(LinearCorrection(a), teacher)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 3, generator=g, dtype=F64)
    s = 0.6 * torch.rand(64, generator=g, dtype=F64)
    t = s + (1 - s) * torch.rand(64, generator=g, dtype=F64)
    want = torch.einsum("bij,bj->bi", torch.linalg.matrix_exp((t - s)[:, None, None] * a), x)
    torch.testing.assert_close(fm(x=x, s=s, t=t), want, rtol=0, atol=1e-12)
    torch.testing.assert_close(fm(x=x, s=s, t=s), x, rtol=0, atol=0)
    torch.testing.assert_close(fm.diagonal_field(x=x, t=t), teacher(x=x, t=t), rtol=0, atol=0)
    # derivatives in x reach the teacher: the diagonal's Jacobian is A (the likelihood's divergence is tr A)
    jac = torch.func.jacrev(lambda y: fm.diagonal_field(x=y[None], t=t[:1])[0])(x[0])
    torch.testing.assert_close(jac, a, rtol=0, atol=1e-12)
    for derivative in ("jvp", "fd", "fd_forward"):
        exact = float(lsd_loss(fm, x, s, t, teacher=teacher, derivative=derivative).detach())
        off = AnchoredFlowMap(LinearCorrection(a, scale=1.1), teacher)
        perturbed = float(lsd_loss(off, x, s, t, teacher=teacher, derivative=derivative).detach())
        # the squared residual of an exact map: 0 (jvp), O(h⁴) (central), O(h²) (forward: 1.5e-6 measured)
        bound = {"jvp": 1e-20, "fd": 1e-9, "fd_forward": 1e-5}[derivative]
        assert exact < bound and perturbed > 1e-3, (derivative, exact, perturbed)
    assert [name for name, _ in fm.named_parameters()] == ["net.weight"] and list(fm.state_dict()) == ["net.weight"]
    with pytest.raises(ValueError, match="teacher"):
        AnchoredFlowMap(LinearCorrection(a), "rfm")
    with pytest.raises(ValueError, match="teacher: output shape"):
        AnchoredFlowMap(LinearCorrection(a), lambda *, x, t: x[:, :2])(x=x, s=s, t=t)


def test_flow_map_ends_equals_one_call_per_end_time_and_calls_an_anchored_teacher_once():
    """`flow_map_ends` gives X_{s,t} for each end time as separate calls would (a plain map: one stacked call; an
    anchored map: its teacher once for the three finite-difference ends, not three times)."""
    a = torch.tensor([[0.0, -1.3, 0.2], [1.3, -0.2, 0.4], [-0.1, 0.5, -0.6]], dtype=F64)
    calls = []

    def teacher(*, x, t):
        calls.append(len(x))
        return x @ a.T

    anchored = AnchoredFlowMap(LinearCorrection(a), teacher, manifold=FlatTorus(3))
    plain = ParametrisedFlowMap(LinearCorrection(a), manifold=FlatTorus(3))
    g = torch.Generator().manual_seed(2)
    x = FlatTorus(3).random_base(16, generator=g).to(F64)
    s = 0.5 * torch.rand(16, generator=g, dtype=F64)
    ts = (s + 0.3, s + 0.4, s + 0.2)
    for fm in (anchored, plain):
        calls.clear()
        got = flow_map_ends(fm, x=x, s=s, ts=ts)
        assert calls == ([16] if fm is anchored else [])
        for end, t in zip(got, ts, strict=True):
            torch.testing.assert_close(end, fm(x=x, s=s, t=t), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="t"):
        flow_map_ends(anchored, x=x, s=s, ts=(s + 0.3, torch.full_like(s, 1.5)))


def test_anchored_map_on_the_torus_moves_by_the_teacher_and_its_correction():
    """On T²: exp_x(τ c + τ² d) for a constant teacher c and a constant correction d, wrapped to (−π, π]."""
    m = FlatTorus(2)
    c, d = torch.tensor([2.5, -4.0], dtype=F64), torch.tensor([0.3, 0.7], dtype=F64)

    class Constant(nn.Module):
        def forward(self, *, x, s, t):
            return d.expand_as(x)

    fm = AnchoredFlowMap(Constant(), lambda *, x, t: c.expand_as(x), manifold=m)
    g = torch.Generator().manual_seed(1)
    x = m.random_base(32, generator=g).to(F64)
    s, t = torch.rand(32, generator=g, dtype=F64).sort(0).values, torch.ones(32, dtype=F64)
    tau = (t - s)[:, None]
    want = torch.remainder(x + tau * c + tau**2 * d + math.pi, 2 * math.pi) - math.pi
    torch.testing.assert_close(fm(x=x, s=s, t=t), want, rtol=0, atol=1e-12)
