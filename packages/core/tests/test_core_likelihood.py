"""CNF likelihoods against exact answers: affine maps, the Gaussian-to-Gaussian path, a density that must integrate
to one, closed-form flows on the sphere, torus and Poincare ball, Hutchinson statistics, gradients and bad inputs."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core import grids
from flowlab.core.distributions import StandardNormal
from flowlab.core.likelihood import (
    AugmentedState,
    bits_per_dim,
    divergence_exact,
    divergence_hutchinson,
    log_likelihood,
    sample_probes,
    sample_with_log_likelihood,
)
from flowlab.core.manifolds import FlatTorus, Lorentz, PoincareBall, Product, Sphere
from flowlab.core.solvers import Trajectory, solve_ode, solve_ode_on_manifold
from flowlab.core.testing.analytic import GaussianToGaussian
from flowlab.core.testing.asserts import assert_convergence_order

F64 = torch.float64
ORDERS = {"euler": 1, "midpoint": 2, "heun": 2, "rk4": 4}


def _back(n: int) -> torch.Tensor:
    return grids.uniform(n, dtype=F64).flip(0)


class AffineFlow:
    """The straight-line flow x_t = M_t x_0 + t b, M_t = (1 - t) I + t A, so X_{0,1}(x) = A x + b.

    With A = V diag(lam) V^-1: v(x, t) = (A - I) M_t^{-1} (x - t b) + b = V diag((lam - 1) / (1 - t + t lam))
    V^-1 (x - t b) + b; with x_0 ~ N(0, I), log p_1(x) = log N(A^{-1}(x - b)) - log|det A|.
    """

    def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
        self.a, self.b = a, b
        lam, vec = torch.linalg.eig(a)
        self.lam, self.vec, self.vec_inv = lam.real, vec.real, torch.linalg.inv(vec.real)

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        tt = t[:, None]
        rate = (self.lam - 1) / (1 - tt + tt * self.lam)
        return ((x - tt * self.b) @ self.vec_inv.T * rate) @ self.vec.T + self.b

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        x0 = torch.linalg.solve(self.a, (x - self.b).T).T
        return StandardNormal((x.shape[1],)).log_prob(x0) - torch.linalg.slogdet(self.a)[1]


def _affine() -> AffineFlow:
    a = torch.tensor([[1.8, 0.4, -0.3], [0.0, 0.6, 0.5], [0.0, 0.0, 1.2]], dtype=F64)
    return AffineFlow(a, torch.tensor([0.5, -1.0, 0.25], dtype=F64))


def _tanh_field(dim: int, seed: int = 0, width: int = 16):
    """A smooth nonlinear time-dependent field (a fixed random one-hidden-layer tanh network), float64."""
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(width, dim + 1, generator=g, dtype=F64) / math.sqrt(dim + 1)
    w2 = torch.randn(dim, width, generator=g, dtype=F64) / math.sqrt(width)

    def field(*, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(torch.cat([x.flatten(1), t[:, None]], 1) @ w1.T)
        return (h @ w2.T).reshape(x.shape)

    return field


# ----------------------------------------------------------------------------------------------- Euclidean, exact


def test_affine_map_exact_log_prob():
    flow = _affine()
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(1), dtype=F64)
    res = log_likelihood(flow, x, source=StandardNormal((3,)), grid=_back(40), method="rk4", divergence="exact")
    torch.testing.assert_close(res.log_prob, flow.log_prob(x), atol=1e-5, rtol=0)
    x0 = torch.linalg.solve(flow.a, (x - flow.b).T).T
    torch.testing.assert_close(res.x_0, x0, atol=1e-5, rtol=0)
    torch.testing.assert_close(
        res.delta, torch.full_like(res.delta, -math.log(abs(torch.det(flow.a)))), atol=1e-5, rtol=0
    )
    assert res.nfe == 40 * 4


def test_sample_with_log_likelihood_affine():
    flow = _affine()
    x0 = torch.randn(16, 3, generator=torch.Generator().manual_seed(2), dtype=F64)
    res = sample_with_log_likelihood(
        flow, x0, source=StandardNormal((3,)), grid=grids.uniform(40, dtype=F64), method="rk4"
    )
    torch.testing.assert_close(res.x_1, x0 @ flow.a.T + flow.b, atol=1e-5, rtol=0)
    torch.testing.assert_close(res.log_prob, flow.log_prob(res.x_1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("method", list(ORDERS))
def test_convergence_order_of_the_augmented_state(method):
    """The log-density error falls at the method's order: the divergence is weighted like the slope (midpoint
    takes it at the midpoint only)."""
    flow = _affine()
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(3), dtype=F64)
    steps = [4, 8, 16] if method != "euler" else [16, 32, 64]
    errs = []
    for n in steps:
        res = log_likelihood(flow, x, source=StandardNormal((3,)), grid=_back(n), method=method)
        errs.append(float((res.log_prob - flow.log_prob(x)).abs().max()))
    assert_convergence_order(errs, [1 / n for n in steps], ORDERS[method], tol=0.3)


def test_x_path_matches_solve_ode():
    field = _tanh_field(2)
    x = torch.randn(8, 2, generator=torch.Generator().manual_seed(4), dtype=F64)
    for method in ("midpoint", "heun"):
        res = log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(10), method=method)
        torch.testing.assert_close(res.x_0, solve_ode(field, x, _back(10), method=method), atol=1e-12, rtol=0)


def test_gaussian_to_gaussian_closed_form():
    mu, s = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([0.5, 2.0], dtype=F64)
    problem = GaussianToGaussian(torch.zeros(2, dtype=F64), torch.ones(2, dtype=F64), mu, s**2)

    def field(*, x, t):
        return problem.velocity(x, t)

    x = problem.sample_data(32, generator=torch.Generator().manual_seed(5))
    one = torch.ones(32, dtype=F64)
    res = log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(16), method="rk4")
    torch.testing.assert_close(res.log_prob, problem.log_prob(x, one), atol=1e-3, rtol=0)
    x_0 = problem.sample_source(32, generator=torch.Generator().manual_seed(6))
    fwd = sample_with_log_likelihood(field, x_0, source=StandardNormal((2,)), grid=grids.uniform(16, dtype=F64))
    torch.testing.assert_close(fwd.log_prob, problem.log_prob(fwd.x_1, one), atol=1e-3, rtol=0)


def test_adaptive_steps():
    flow = _affine()
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(7), dtype=F64)
    res = log_likelihood(flow, x, source=StandardNormal((3,)), adaptive=True, atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(res.log_prob, flow.log_prob(x), atol=1e-6, rtol=0)
    assert res.nfe > 0 and res.trajectory is None
    grid = grids.uniform(4, dtype=F64)
    fwd = sample_with_log_likelihood(flow, res.x_0, source=StandardNormal((3,)), grid=grid, adaptive=True,
                                     method="bosh3", return_trajectory=True)  # fmt: skip
    torch.testing.assert_close(fwd.x_1, x, atol=1e-5, rtol=0)
    assert fwd.trajectory.states.x.shape == (5, 8, 3)
    torch.testing.assert_close(fwd.trajectory.times, grid)


def test_one_dimensional_density_integrates_to_one():
    field = _tanh_field(1, seed=7, width=8)
    x = torch.linspace(-10, 10, 801, dtype=F64)[:, None]
    with torch.inference_mode():
        log_p = log_likelihood(field, x, source=StandardNormal((1,)), grid=_back(16), method="rk4").log_prob
    mass = torch.trapezoid(log_p.exp(), x[:, 0])
    assert abs(float(mass) - 1) < 1e-3
    # the field is not trivial: the density differs from the source's
    assert float((log_p - StandardNormal((1,)).log_prob(x)).abs().max()) > 0.05


def test_inference_mode_inputs_give_the_same_likelihood_as_plain_ones():
    """Everything made under inference mode (points, grid, a condition) and the call in it: the solve leaves
    inference mode on copies (older torch's vjp returned zeros there), so the result equals the plain call's."""

    def field(*, x, t, scale):
        return -scale[:, None] * x * (1 + t[:, None])

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.randn(6, 2, generator=torch.Generator().manual_seed(3), dtype=F64)
        scale = torch.linspace(0.2, 1.0, 6, dtype=F64)
        res = log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(32), method="rk4", scale=scale)
        return res.log_prob, x, scale

    plain, x, s = run()
    with torch.inference_mode():
        inferred, _, _ = run()
    torch.testing.assert_close(inferred, plain, atol=1e-12, rtol=0)
    # v = -s (1 + t) x: x_0 = x e^{1.5 s} and log p_1(x) = log N(x_0) + 2 (1.5 s), the divergence's share
    exact = StandardNormal((2,)).log_prob(x * (1.5 * s[:, None]).exp()) + 3 * s
    torch.testing.assert_close(plain, exact, atol=1e-4, rtol=0)  # rk4 at 32 steps; the divergence adds >= 0.6


def test_trajectory_and_conditioning():
    def field(*, x, t, scale):
        return -scale[:, None] * x

    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(8), dtype=F64)
    scale = torch.linspace(0.1, 1.0, 5, dtype=F64)
    res = log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(16), method="rk4", return_trajectory=True,
                         scale=scale)  # fmt: skip
    assert isinstance(res.trajectory, Trajectory) and isinstance(res.trajectory.states, AugmentedState)
    assert res.trajectory.states.x.shape == (17, 5, 2) and res.trajectory.states.delta.shape == (17, 5)
    torch.testing.assert_close(res.trajectory.final.x, res.x_0)
    # v = -s x: x_0 = x e^{s}, delta = -int_0^1 div = 2 s
    torch.testing.assert_close(res.x_0, x * scale[:, None].exp(), atol=1e-6, rtol=0)
    torch.testing.assert_close(res.delta, 2 * scale, atol=1e-6, rtol=0)


def test_event_shaped_inputs_and_exact_divergence():
    """x: (B, 2, 3): the divergence is the trace of the 6 x 6 Jacobian (checked against autograd's Jacobian)."""
    field = _tanh_field(6, seed=9)
    x = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(10), dtype=F64)
    t = torch.full((4,), 0.3, dtype=F64)
    div = divergence_exact(field, x, t)
    for i in range(4):
        jac = torch.autograd.functional.jacobian(lambda y: field(x=y[None], t=t[:1])[0], x[i]).reshape(6, 6)
        torch.testing.assert_close(div[i], jac.trace())


# --------------------------------------------------------------------------------------------------- Hutchinson


@pytest.mark.parametrize("probe", ["rademacher", "gaussian"])
def test_hutchinson_mean_within_three_standard_errors(probe):
    field = _tanh_field(5, seed=11)
    x = torch.randn(1, 5, generator=torch.Generator().manual_seed(12), dtype=F64).expand(2000, 5)
    t = torch.full((2000,), 0.4, dtype=F64)
    exact = divergence_exact(field, x[:1], t[:1])
    eps = sample_probes(x, 1, probe=probe, generator=torch.Generator().manual_seed(13))
    est = divergence_hutchinson(field, x, t, eps)
    se = est.std() / math.sqrt(est.numel())
    assert float(se) > 0
    assert abs(float(est.mean() - exact)) < 3 * float(se)


def test_hutchinson_log_likelihood_unbiased_and_probes_fixed():
    field = _tanh_field(4, seed=14)
    x = torch.randn(1, 4, generator=torch.Generator().manual_seed(15), dtype=F64).expand(1000, 4)
    src = StandardNormal((4,))
    exact = log_likelihood(field, x[:1], source=src, grid=_back(8), method="midpoint", divergence="exact")
    est = log_likelihood(field, x, source=src, grid=_back(8), method="midpoint", divergence="hutchinson",
                         generator=torch.Generator().manual_seed(16)).log_prob  # fmt: skip
    se = est.std() / math.sqrt(est.numel())
    assert abs(float(est.mean() - exact.log_prob[0])) < 3 * float(se)
    # more probes, less variance (4 probes: about a quarter)
    est4 = log_likelihood(field, x, source=src, grid=_back(8), method="midpoint", divergence="hutchinson",
                          num_probes=4, generator=torch.Generator().manual_seed(17)).log_prob  # fmt: skip
    assert 0.15 < float(est4.var() / est.var()) < 0.4


def test_probe_is_fixed_along_the_trajectory():
    """With a constant Jacobian J, a fixed probe gives delta = -eps^T J eps exactly (redrawn probes would not)."""
    jac = torch.tensor([[0.3, 1.0, 0.0], [-0.5, -0.2, 0.7], [0.1, 0.0, 0.4]], dtype=F64)

    def field(*, x, t):
        return x @ jac.T

    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(18), dtype=F64)
    res = log_likelihood(field, x, source=StandardNormal((3,)), grid=_back(5), method="rk4", divergence="hutchinson",
                         generator=torch.Generator().manual_seed(19))  # fmt: skip
    eps = sample_probes(x, 1, generator=torch.Generator().manual_seed(19))[0]
    torch.testing.assert_close(res.delta, -((eps @ jac.T) * eps).sum(-1), atol=1e-12, rtol=0)
    assert not torch.allclose(res.delta, torch.full_like(res.delta, -float(jac.trace())))


# ---------------------------------------------------------------------------------------------------- gradients


def test_gradcheck_through_log_likelihood():
    flow = _affine()
    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(20), dtype=F64, requires_grad=True)
    b = flow.b.clone().requires_grad_()

    def run(x, b, divergence):
        f = AffineFlow(flow.a, b)
        return log_likelihood(f, x, source=StandardNormal((3,)), grid=_back(3), method="midpoint",
                              divergence=divergence, generator=torch.Generator().manual_seed(21),
                              enable_grad=True).log_prob  # fmt: skip

    assert torch.autograd.gradcheck(lambda x, b: run(x, b, "exact"), (x, b))
    assert torch.autograd.gradcheck(lambda x, b: run(x, b, "hutchinson"), (x, b))
    # the gradient is the analytic score of N(b, A A^T), not detached (flow_matching issue #59)
    res = log_likelihood(flow, x, source=StandardNormal((3,)), grid=_back(40), method="rk4", enable_grad=True)
    (grad,) = torch.autograd.grad(res.log_prob.sum(), x)
    score = -torch.linalg.solve(flow.a @ flow.a.T, (x - flow.b).T).T
    torch.testing.assert_close(grad, score.detach(), atol=1e-5, rtol=0)


def test_gradients_reach_network_parameters():
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()

    def field(*, x, t):
        return net(torch.cat([x, t[:, None]], 1))

    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(22), dtype=F64)
    log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(4), enable_grad=True).log_prob.mean().backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in net.parameters())


def test_evaluation_results_carry_no_graph_by_default():
    """Without enable_grad the results hold no autograd graph (whatever x and the parameters require), with the
    same values as the differentiable run; sampling alike."""
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).double()

    def field(*, x, t):
        return net(torch.cat([x, t[:, None]], 1))

    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(24), dtype=F64, requires_grad=True)
    plain = log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(4))
    graph = log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(4), enable_grad=True)
    assert not plain.log_prob.requires_grad and plain.log_prob.grad_fn is None and not plain.x_0.requires_grad
    assert graph.log_prob.requires_grad
    torch.testing.assert_close(plain.log_prob, graph.log_prob.detach())
    fwd = sample_with_log_likelihood(field, x.detach(), source=StandardNormal((2,)), grid=_back(4).flip(0))
    assert not fwd.log_prob.requires_grad and not fwd.x_1.requires_grad
    with pytest.raises(ValueError, match="enable_grad"):
        log_likelihood(field, x, source=StandardNormal((2,)), grid=_back(4), enable_grad="yes")


# ---------------------------------------------------------------------------------------------------- manifolds


def test_sphere_uniform_and_rotation_give_minus_log_four_pi():
    sphere = Sphere(2)
    x = sphere.random_uniform(32, generator=torch.Generator().manual_seed(23), dtype=F64)
    omega = torch.tensor([0.3, -1.0, 2.0], dtype=F64)

    def zero(*, x, t):
        return torch.zeros_like(x)

    def rotation(*, x, t):
        return torch.linalg.cross(omega.expand_as(x), x)

    for field in (zero, rotation):
        for divergence in ("exact", "hutchinson"):
            res = log_likelihood(field, x, manifold=sphere, grid=_back(8), method="rk4", divergence=divergence,
                                 generator=torch.Generator().manual_seed(24))  # fmt: skip
            torch.testing.assert_close(res.log_prob, torch.full_like(res.log_prob, -math.log(4 * math.pi)))
    assert sphere.belongs(res.x_0, atol=1e-10).all()


def _polar_flow_log_prob(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """Uniform on S^2 pushed for unit time along P_x (alpha e_z): tan(theta_t / 2) = tan(theta_0 / 2) e^{-alpha t}."""
    u = torch.tan(torch.arccos(x[:, 2].clamp(-1, 1)) / 2)
    return -math.log(4 * math.pi) + 2 * alpha + 2 * torch.log((1 + u**2) / (1 + u**2 * math.exp(2 * alpha)))


def test_sphere_polar_flow_closed_form_and_solver_agreement():
    """An ambient constant field (not tangent): projected to P_x a, Riemannian divergence -2 <a, x>."""
    sphere, alpha = Sphere(2), 0.8
    a = torch.tensor([0.0, 0.0, alpha], dtype=F64)

    def field(*, x, t):
        return a.expand_as(x)

    x = sphere.random_uniform(64, generator=torch.Generator().manual_seed(25), dtype=F64)
    res = log_likelihood(field, x, manifold=sphere, grid=_back(32), method="rk4")
    torch.testing.assert_close(res.log_prob, _polar_flow_log_prob(x, alpha), atol=1e-5, rtol=0)
    torch.testing.assert_close(res.x_0, solve_ode_on_manifold(field, x, _back(32), manifold=sphere, method="rk4"))
    ones = torch.ones(64, dtype=F64)
    torch.testing.assert_close(divergence_exact(field, x, ones, manifold=sphere), -2 * x @ a)
    # Hutchinson with projected probes: unbiased
    xs = x[:1].expand(1000, 3)
    est = log_likelihood(field, xs, manifold=sphere, grid=_back(8), method="midpoint", divergence="hutchinson",
                         generator=torch.Generator().manual_seed(26)).log_prob  # fmt: skip
    se = est.std() / math.sqrt(est.numel())
    assert abs(float(est.mean() - _polar_flow_log_prob(x[:1], alpha)[0])) < 3 * float(se) + 1e-3


def _poincare_contraction_log_prob(ball: PoincareBall, x: torch.Tensor, beta: float) -> torch.Tensor:
    """v = -beta x for unit time: x_0 = e^beta x_1 and p_1 lambda(x_1)^d = p_0 lambda(x_0)^d e^{d beta}."""
    d, x0 = ball.dim, x * math.exp(beta)
    lam = lambda y: ball.lambda_x(y).squeeze(-1).log()  # noqa: E731
    return ball.base_log_prob(x0) + d * beta + d * (lam(x0) - lam(x))


def test_poincare_identity_and_contraction():
    ball, beta = PoincareBall(2, base_scale=0.7), 0.4
    x = ball.random_base(32, generator=torch.Generator().manual_seed(27), dtype=F64)
    x = x / (1 + x.norm(dim=-1, keepdim=True)) * math.exp(-beta)  # keep e^beta x inside the ball

    def zero(*, x, t):
        return torch.zeros_like(x)

    def contraction(*, x, t):
        return -beta * x

    res = log_likelihood(zero, x, manifold=ball, grid=_back(4))
    torch.testing.assert_close(res.log_prob, ball.base_log_prob(x))
    res = log_likelihood(contraction, x, manifold=ball, grid=_back(32), method="rk4")
    torch.testing.assert_close(res.log_prob, _poincare_contraction_log_prob(ball, x, beta), atol=1e-6, rtol=0)


def test_flow_that_leaves_the_poincare_ball_gives_zero_density_not_a_number():
    """dx/dt = −2x carries x back to e^{2(1−t)} x: from ‖x‖ = 0.5 that crosses the boundary (no source mass reaches
    x, log p = −inf, with a warning), from ‖x‖ = 0.1 it stays inside (‖x_0‖ = 0.74) and matches the closed form."""
    ball, beta = PoincareBall(2), 2.0
    x = torch.tensor([[0.5, 0.0], [0.0, 0.1], [-0.06, 0.08]], dtype=F64)

    def expansion_backwards(*, x, t):
        return -beta * x

    with pytest.warns(RuntimeWarning, match="1 of 3 reverse trajectories reached the manifold's boundary"):
        res = log_likelihood(expansion_backwards, x, manifold=ball, grid=_back(64), method="rk4")
    assert res.left_manifold.tolist() == [True, False, False]
    assert res.log_prob[0] == -math.inf
    torch.testing.assert_close(res.log_prob[1:], _poincare_contraction_log_prob(ball, x[1:], beta), atol=1e-6, rtol=0)
    with pytest.warns(RuntimeWarning, match="forward trajectories"):
        fwd = sample_with_log_likelihood(lambda *, x, t: beta * x, x, manifold=ball, grid=_back(64).flip(0))
    assert fwd.left_manifold.tolist() == [True, False, False] and fwd.log_prob[0].isnan()
    sphere_res = log_likelihood(lambda *, x, t: torch.zeros_like(x), Sphere(2).random_base(4), manifold=Sphere(2),
                                grid=_back(2))  # fmt: skip
    assert not sphere_res.left_manifold.any()


def test_torus_and_product_closed_forms():
    """Torus angle flow dx/dt = sin x (tan(x/2) grows like e^t) alone and in a product with the sphere flow."""
    torus, sphere = FlatTorus(2), Sphere(2)
    g = torch.Generator().manual_seed(28)
    angles = torus.random_uniform(16, generator=g, dtype=F64)
    points = sphere.random_uniform(16, generator=g, dtype=F64)
    a = torch.tensor([0.0, 0.0, 0.5], dtype=F64)

    def torus_truth(x):
        u2 = torch.tan(x / 2) ** 2
        return -2 * math.log(2 * math.pi) + (-1 + torch.log((1 + u2) / (1 + u2 * math.exp(-2)))).sum(-1)

    def sin_field(*, x, t):
        return torch.sin(x)

    res = log_likelihood(sin_field, angles, manifold=torus, grid=_back(32), method="rk4")
    torch.testing.assert_close(res.log_prob, torus_truth(angles), atol=1e-5, rtol=0)

    product = Product([torus, sphere])

    def both(*, x, t):
        return torch.cat([torch.sin(x[:, :2]), a.expand(x.shape[0], 3)], 1)

    res = log_likelihood(both, torch.cat([angles, points], 1), manifold=product, grid=_back(32), method="rk4")
    torch.testing.assert_close(res.log_prob, torus_truth(angles) + _polar_flow_log_prob(points, 0.5), atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------------------ bits/dim, bad inputs


def test_bits_per_dim():
    log_p = torch.tensor([-3 * 10 * math.log(2), 0.0], dtype=F64)
    torch.testing.assert_close(bits_per_dim(log_p, 10), torch.tensor([3.0, 0.0], dtype=F64))
    torch.testing.assert_close(
        bits_per_dim(log_p, 10, dequantization_offset=math.log(256)), torch.tensor([11.0, 8.0], dtype=F64)
    )
    with pytest.raises(ValueError, match="num_dims"):
        bits_per_dim(log_p, 0)


def test_bad_inputs_name_the_argument():
    flow, src = _affine(), StandardNormal((3,))
    x = torch.randn(4, 3, dtype=F64)
    bad = x.clone()
    bad[0, 0] = float("nan")
    cases = {
        "x": lambda: log_likelihood(flow, bad, source=src, grid=_back(2)),
        "divergence": lambda: log_likelihood(flow, x, source=src, grid=_back(2), divergence="jacobian"),
        "method": lambda: log_likelihood(flow, x, source=src, grid=_back(2), method="rk45"),
        "probe": lambda: log_likelihood(flow, x, source=src, grid=_back(2), divergence="hutchinson", probe="uniform"),
        "num_probes": lambda: log_likelihood(flow, x, source=src, grid=_back(2), divergence="hutchinson", num_probes=0),
        "grid": lambda: log_likelihood(flow, x, source=src, grid=grids.uniform(2, dtype=F64)),
        "source": lambda: log_likelihood(flow, x, grid=_back(2)),
        "field": lambda: log_likelihood("flow", x, source=src, grid=_back(2)),
        "manifold": lambda: log_likelihood(flow, x, manifold=Lorentz(2), grid=_back(2)),
        "t": lambda: divergence_exact(flow, x, torch.tensor(0.5, dtype=F64)),
        "eps": lambda: divergence_hutchinson(flow, x, torch.ones(4, dtype=F64), torch.ones(4, 2, dtype=F64)),
    }
    for name, call in cases.items():
        with pytest.raises(ValueError, match=rf"^{name}\b"):
            call()
    with pytest.raises(ValueError, match="x"):  # off the sphere
        log_likelihood(flow, x, manifold=Sphere(2), grid=_back(2))
    with pytest.raises(ValueError, match="grid"):  # fixed steps need a grid
        log_likelihood(flow, x, source=src)


def test_exact_divergence_refuses_more_than_64_dims_unless_forced():
    def field(*, x, t):
        return -x

    x, t = torch.randn(2, 65, dtype=F64), torch.ones(2, dtype=F64)
    with pytest.raises(ValueError, match=r"^divergence"):
        divergence_exact(field, x, t)
    with pytest.raises(ValueError, match=r"^divergence"):
        log_likelihood(field, x, source=StandardNormal((65,)), grid=_back(2), divergence="exact")
    torch.testing.assert_close(divergence_exact(field, x, t, force=True), torch.full((2,), -65.0, dtype=F64))
    # the default above 16 dimensions is Hutchinson: for v = -x every Rademacher estimate is exactly -65
    res = log_likelihood(field, x, source=StandardNormal((65,)), grid=_back(2), method="euler")
    torch.testing.assert_close(res.delta, torch.full((2,), 65.0, dtype=F64))
