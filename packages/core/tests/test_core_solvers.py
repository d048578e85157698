"""Continuous solvers against exact answers: closed-form flows of the analytic kit, convergence orders, round
trips, sample moments, gradients and on-manifold invariants."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from flowlab.core import grids
from flowlab.core.manifolds import Sphere
from flowlab.core.schedules import EDM, CondOT, Cosine
from flowlab.core.solvers import (
    JVPState,
    StepInfo,
    Trajectory,
    edm_sample,
    invert_ode,
    sample_flow_map,
    solve_ode,
    solve_ode_adaptive,
    solve_ode_on_manifold,
    solve_sde,
    velocity_to_sde_drift,
)
from flowlab.core.testing.analytic import GaussianMixture, GaussianToGaussian
from flowlab.core.testing.asserts import assert_convergence_order, assert_moments_close

F64 = torch.float64
METHODS = ["euler", "midpoint", "heun", "rk4"]
ORDERS = {"euler": 1, "midpoint": 2, "heun": 2, "rk4": 4}


def _g2g() -> GaussianToGaussian:
    """A diagonal Gaussian-to-Gaussian problem on a cosine schedule: a velocity nonlinear in t."""
    vec = lambda *v: torch.tensor(v, dtype=F64)  # noqa: E731
    return GaussianToGaussian(vec(0.5, -1.0), vec(1.0, 0.3), vec(2.0, 1.0), vec(0.1, 2.0), Cosine())


def _ends(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(n, dtype=F64), torch.ones(n, dtype=F64)


def _source(problem, n: int = 32, seed: int = 0) -> torch.Tensor:
    return problem.sample_source(n, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- fixed-step ODE


@pytest.mark.parametrize("method", METHODS)
def test_velocity_3t2_maps_x_to_x_plus_one(method):
    seen = []

    def field(*, x, t):
        seen.append(tuple(t.shape))
        return (3 * t**2)[:, None].expand_as(x)

    x = torch.randn(5, 3, dtype=F64)
    n = 400
    y = solve_ode(field, x, grids.uniform(n, dtype=F64), method=method)
    # Error of each rule on int_0^1 3t^2 dt: left Riemann sum (3/2) h, the others O(h^2) (rk4 is exact).
    tol = {"euler": 1.6 / n, "midpoint": 1 / n**2, "heun": 1 / n**2, "rk4": 1e-12}[method]
    torch.testing.assert_close(y, x + 1, atol=tol, rtol=0)
    assert set(seen) == {(5,)}  # the field always receives one time per sample
    back = invert_ode(field, y, grids.uniform(n, dtype=F64), method=method)
    torch.testing.assert_close(back, x, atol=2 * tol, rtol=0)


@pytest.mark.parametrize("method", METHODS)
def test_convergence_order_on_gaussian_flow(method):
    problem = _g2g()
    x0 = _source(problem)
    zero, one = _ends(len(x0))
    exact = problem.flow_map(x0, zero, one)
    steps = [16, 32, 64, 128]
    errors = [
        (solve_ode(problem.velocity, x0, grids.uniform(n, dtype=F64), method=method) - exact).abs().max() for n in steps
    ]
    assert_convergence_order(errors, [1 / n for n in steps], ORDERS[method], tol=0.25)


@pytest.mark.parametrize("method", ["euler", "heun"])
def test_convergence_order_on_mixture_against_dopri5(method):
    problem = GaussianMixture.ring(8, dtype=F64)
    x0 = _source(problem)
    ref = solve_ode_adaptive(problem.velocity, x0, torch.tensor([0.0, 1.0], dtype=F64), atol=1e-10, rtol=1e-10).x
    steps = [16, 32, 64]
    errors = [
        (solve_ode(problem.velocity, x0, grids.uniform(n, dtype=F64), method=method) - ref).abs().max() for n in steps
    ]
    assert_convergence_order(errors, [1 / n for n in steps], ORDERS[method], tol=0.25)


def test_solve_ode_matches_closed_form_flow_map_both_directions():
    problem = _g2g()
    x0 = _source(problem)
    zero, one = _ends(len(x0))
    x1 = solve_ode(problem.velocity, x0, grids.uniform(32, dtype=F64), method="rk4")
    torch.testing.assert_close(x1, problem.flow_map(x0, zero, one), atol=1e-5, rtol=0)
    # Part of the way, and backwards from data to source.
    grid = torch.linspace(0.2, 0.7, 33, dtype=F64)
    mid = solve_ode(problem.velocity, x0, grid, method="rk4")
    torch.testing.assert_close(mid, problem.flow_map(x0, zero + 0.2, zero + 0.7), atol=1e-7, rtol=0)
    back = solve_ode(problem.velocity, x1, grids.uniform(32, dtype=F64).flip(0), method="rk4")
    torch.testing.assert_close(back, problem.flow_map(x1, one, zero), atol=1e-5, rtol=0)


def test_heun_transports_a_general_gaussian_to_its_target():
    """Non-commuting covariances (no closed-form map): the pushed-forward samples have the target moments."""
    cov_0 = torch.tensor([[1.0, 0.6], [0.6, 0.8]], dtype=F64)
    cov_1 = torch.tensor([[0.3, -0.2], [-0.2, 1.5]], dtype=F64)
    problem = GaussianToGaussian(torch.zeros(2, dtype=F64), cov_0, torch.tensor([2.0, -1.0], dtype=F64), cov_1)
    assert not problem.commuting
    x0 = problem.sample_source(20_000, generator=torch.Generator().manual_seed(0))
    x1 = solve_ode(problem.velocity, x0, grids.uniform(32, dtype=F64), method="heun")
    assert_moments_close(x1, problem.mu_1, problem.cov_1)


@pytest.mark.parametrize("dtype", [F64, torch.float32], ids=["f64", "f32"])
def test_inversion_round_trip_rk4_64_steps(dtype):
    problem = GaussianMixture.ring(8, dtype=dtype)
    x0 = _source(problem, 256)
    grid = grids.uniform(64, dtype=dtype)
    x1 = solve_ode(problem.velocity, x0, grid, method="rk4")
    assert float((x1 - x0).norm(dim=-1).min()) > 0.1  # the flow moved every point
    back = invert_ode(problem.velocity, x1, grid, method="rk4")
    assert float((back - x0).norm(dim=-1).max()) < 1e-4


def test_trajectory_and_callback():
    problem = _g2g()
    x0 = _source(problem, 8)
    grid = grids.uniform(5, dtype=F64)
    infos: list[StepInfo] = []
    traj = solve_ode(problem.velocity, x0, grid, method="midpoint", return_trajectory=True, callback=infos.append)
    assert isinstance(traj, Trajectory)
    assert traj.states.shape == (6, 8, 2) and torch.equal(traj.times, grid)
    assert torch.equal(traj.states[0], x0)
    torch.testing.assert_close(traj.final, solve_ode(problem.velocity, x0, grid, method="midpoint"))
    assert [i.step for i in infos] == list(range(5))
    assert all(i.t.shape == (8,) and float(i.t_next[0] - i.t[0]) == pytest.approx(0.2) for i in infos)
    torch.testing.assert_close(infos[2].x, traj.states[3])


def test_custom_stepper_and_conditioning_are_passed_through():
    calls = []

    def stepper(field, x, t, t_next, **cond):
        calls.append(sorted(cond))
        return x + (t_next - t)[:, None] * field(x=x, t=t, **cond)

    def field(*, x, t, shift):
        return torch.zeros_like(x) + shift

    y = solve_ode(field, torch.zeros(4, 2), grids.uniform(4), method=stepper, shift=torch.ones(4, 2))
    torch.testing.assert_close(y, torch.ones(4, 2))
    assert calls == [["shift"]] * 4


class _TanhField(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = nn.Parameter(0.5 * torch.randn(dim, dim, generator=g, dtype=F64))

    def forward(self, *, x, t):
        return torch.tanh(x @ self.weight.T) * (1 + t[:, None]) - 0.3 * x


@pytest.mark.parametrize("method", ["heun", "rk4"])
def test_gradcheck_through_solve_ode(method):
    net = _TanhField(3)
    x0 = torch.randn(4, 3, dtype=F64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    grid = grids.uniform(4, dtype=F64)

    def run(x, weight):
        with torch.nn.utils.stateless._reparametrize_module(net, {"weight": weight}):
            return solve_ode(net, x, grid, method=method)

    assert torch.autograd.gradcheck(run, (x0, net.weight.detach().clone().requires_grad_(True)))


def test_jvp_euler_tangent_is_the_derivative_of_the_euler_map():
    net = _TanhField(3)
    x0 = torch.randn(4, 3, dtype=F64, generator=torch.Generator().manual_seed(2))
    direction = torch.randn(4, 3, dtype=F64, generator=torch.Generator().manual_seed(3))
    grid = grids.uniform(10, dtype=F64)
    with torch.no_grad():
        out = solve_ode(net, JVPState(x0, direction), grid, method="jvp_euler")
        plain = solve_ode(net, x0, grid, method="euler")
    torch.testing.assert_close(out.x, plain, rtol=1e-12, atol=1e-12)
    eps = 1e-6  # central differences of the Euler map in the tangent direction
    fd = (
        solve_ode(net, x0 + eps * direction, grid, method="euler")
        - solve_ode(net, x0 - eps * direction, grid, method="euler")
    ) / (2 * eps)
    torch.testing.assert_close(out.tangent, fd.detach(), rtol=1e-6, atol=1e-8)


def test_jvp_euler_on_affine_field_gives_growth_factor():
    a = -0.7

    def field(*, x, t):
        return a * x + torch.sin(3 * t)[:, None]

    n = 20
    state = JVPState(torch.randn(6, 1, dtype=F64), torch.ones(6, 1, dtype=F64))
    out = solve_ode(field, state, grids.uniform(n, dtype=F64), method="jvp_euler", return_trajectory=True)
    assert out.states.tangent.shape == (n + 1, 6, 1)
    torch.testing.assert_close(out.final.tangent, torch.full((6, 1), (1 + a / n) ** n, dtype=F64))


# ---------------------------------------------------------------- adaptive


def test_adaptive_dopri5_matches_closed_form():
    problem = _g2g()
    x0 = _source(problem)
    zero, one = _ends(len(x0))
    t_span = torch.tensor([0.0, 0.5, 1.0], dtype=F64)
    sol = solve_ode_adaptive(problem.velocity, x0, t_span, atol=1e-9, rtol=1e-9)
    assert sol.states.shape == (3, 32, 2) and sol.nfe > 6
    torch.testing.assert_close(sol.states[1], problem.flow_map(x0, zero, zero + 0.5), atol=1e-7, rtol=0)
    torch.testing.assert_close(sol.x, problem.flow_map(x0, zero, one), atol=1e-7, rtol=0)
    back = solve_ode_adaptive(problem.velocity, sol.x, t_span.flip(0), atol=1e-9, rtol=1e-9)
    torch.testing.assert_close(back.x, x0, atol=1e-6, rtol=0)
    third = solve_ode_adaptive(problem.velocity, x0, t_span, method="bosh3", atol=1e-7, rtol=1e-7)
    assert third.nfe > sol.nfe  # a lower-order pair needs more evaluations
    torch.testing.assert_close(third.x, sol.x, atol=1e-4, rtol=0)


def test_adaptive_adjoint_gradient_equals_direct_gradient():
    net = _TanhField(2)
    x0 = torch.randn(5, 2, dtype=F64, generator=torch.Generator().manual_seed(4))
    t_span = torch.tensor([0.0, 1.0], dtype=F64)
    grads = []
    for field, adjoint in ((net, False), (net, True), (net.forward, True)):  # a bound method finds its module
        net.zero_grad()
        x = x0.clone().requires_grad_(True)
        solve_ode_adaptive(field, x, t_span, atol=1e-10, rtol=1e-10, adjoint=adjoint).x.pow(2).sum().backward()
        grads.append((x.grad.clone(), net.weight.grad.clone()))
    for x_grad, weight_grad in grads[1:]:
        torch.testing.assert_close(x_grad, grads[0][0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(weight_grad, grads[0][1], atol=1e-6, rtol=1e-6)


# ---------------------------------------------------------------- SDE


def test_sde_with_exact_mixture_score_reproduces_mixture_moments():
    means = torch.tensor([[2.0, 0.0], [-1.0, 1.5], [0.0, -2.0]], dtype=F64)
    covs = torch.tensor([[0.3, 0.1], [0.2, 0.4], [0.5, 0.2]], dtype=F64)
    problem = GaussianMixture(torch.tensor([0.5, 0.3, 0.2], dtype=F64), means, covs, CondOT())
    n = 10_000
    g = torch.Generator().manual_seed(5)
    x0 = problem.sample_source(n, generator=g)
    drift = velocity_to_sde_drift(problem.velocity, problem.path, 1.0)
    x1 = solve_sde(drift, 1.0, x0, grids.uniform(100, dtype=F64), generator=g)
    one = torch.ones(1, dtype=F64)
    # Tolerance: 5 standard errors of the sample moments plus an allowance for the O(h) Euler-Maruyama bias
    # (measured below 0.02 at 100 steps with 200k samples).
    assert_moments_close(x1, problem.mean(one)[0], problem.cov(one)[0], extra_tol=0.03)
    # The noise matters: without the score correction the same SDE lands elsewhere.
    naive = solve_sde(problem.velocity, 1.0, x0, grids.uniform(100, dtype=F64), generator=g)
    with pytest.raises(AssertionError):
        assert_moments_close(naive, problem.mean(one)[0], problem.cov(one)[0], extra_tol=0.03)


def test_sde_without_noise_is_euler_and_per_sample_generators_are_independent():
    problem = GaussianMixture.ring(4, dtype=F64)
    x0 = _source(problem, 6)
    grid = grids.uniform(10, dtype=F64)
    torch.testing.assert_close(
        solve_sde(problem.velocity, 0.0, x0, grid), solve_ode(problem.velocity, x0, grid, method="euler")
    )
    g_of_t = lambda t: 0.5 * (1 - t)  # noqa: E731
    drift = velocity_to_sde_drift(problem.velocity, problem.path, g_of_t)
    gens = lambda: [torch.Generator().manual_seed(100 + i) for i in range(6)]  # noqa: E731
    full = solve_sde(drift, g_of_t, x0, grid, generator=gens())
    part = solve_sde(drift, g_of_t, x0[2:4], grid, generator=gens()[2:4])
    torch.testing.assert_close(part, full[2:4])
    assert not torch.allclose(full, solve_ode(problem.velocity, x0, grid, method="euler"))


def test_sde_state_projection_keeps_a_simplex_diffusion_on_the_simplex():
    """Sum-zero Brownian noise (std 0.3) pulled towards the barycentre of the 3-simplex, from near a vertex: without
    a state projection many states leave the simplex; with `Simplex(3).projx` every state of every step is on it
    (sum 1, coordinates >= 1e-8), and an identity projection changes nothing."""
    from flowlab.core.manifolds import Simplex

    simplex, batch = Simplex(3), 2000
    x0 = torch.tensor([0.96, 0.02, 0.02], dtype=F64).expand(batch, 3).clone()
    drift = lambda x, t: 2.0 * (1 / 3 - x)  # noqa: E731
    sum_zero = lambda z: z - z.mean(-1, keepdim=True)  # noqa: E731
    grid = grids.uniform(20, dtype=F64)

    def run(**kw):
        return solve_sde(drift, 0.3, x0, grid, generator=torch.Generator().manual_seed(3), noise_projection=sum_zero,
                         return_trajectory=True, **kw).states  # fmt: skip

    free, kept = run(), run(projection=simplex.projx)
    assert float((free < 0).double().mean()) > 0.01
    assert bool((kept >= 1e-8).all()) and torch.allclose(kept.sum(-1), torch.ones((), dtype=F64))
    torch.testing.assert_close(run(projection=lambda x: x), free, rtol=0, atol=0)
    with pytest.raises(ValueError, match="projection: expected a callable"):
        solve_sde(drift, 0.3, x0, grid, projection="projx")
    with pytest.raises(ValueError, match=r"projection: expected it to return the state's shape \(2000, 3\)"):
        solve_sde(drift, 0.3, x0, grid, projection=lambda x: x[:, :2])


def test_sde_noise_projection_keeps_the_centre_of_mass_and_the_in_subspace_variance():
    """Brownian motion of 5 particles in 3-D with centre-of-mass-free increments: the centre of mass never moves, and
    each coordinate's variance after time 1 is (N - 1) / N (the projection removes one of N directions per axis)."""
    n_atoms, batch = 5, 4000

    def mean_free(z):
        z = z.view(z.shape[0], n_atoms, 3)
        return (z - z.mean(1, keepdim=True)).view(z.shape[0], -1)

    x0 = torch.randn(batch, 3 * n_atoms, generator=torch.Generator().manual_seed(0), dtype=F64)
    zero = lambda x, t: torch.zeros_like(x)  # noqa: E731
    x1 = solve_sde(zero, 1.0, x0, grids.uniform(20, dtype=F64), generator=torch.Generator().manual_seed(1),
                   noise_projection=mean_free)  # fmt: skip
    com = lambda x: x.view(batch, n_atoms, 3).mean(1)  # noqa: E731
    torch.testing.assert_close(com(x1), com(x0))
    var = (x1 - x0).var(0)
    # 5 standard errors of a variance estimate from 4000 samples: 5 sqrt(2 / 4000) (N - 1) / N
    assert float((var - 0.8).abs().max()) < 5 * (2 / batch) ** 0.5 * 0.8 + 0.01
    with pytest.raises(ValueError, match="noise_projection"):
        solve_sde(zero, 1.0, x0, grids.uniform(2, dtype=F64), noise_projection="mean_free")


# ---------------------------------------------------------------- EDM


def _gaussian_denoiser(mean: torch.Tensor, std: torch.Tensor):
    """E[x | x + sigma z] for x ~ N(mean, diag(std^2))."""

    def denoiser(*, x, sigma):
        return mean + std**2 / (std**2 + sigma[:, None] ** 2) * (x - mean)

    return denoiser


def test_edm_deterministic_sampler_converges_to_exact_ode_solution():
    mean, std = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([0.5, 2.0], dtype=F64)
    noise = torch.randn(64, 2, dtype=F64, generator=torch.Generator().manual_seed(6))
    steps, errors = [16, 32, 64], []
    for n in steps:
        sigmas = torch.cat([EDM()(grids.uniform(n - 1, dtype=F64)).sigma, torch.zeros(1, dtype=F64)])
        # Probability-flow ODE of N(mean, std^2) + sigma noise: x_sigma - mean scales with sqrt(std^2 + sigma^2).
        exact = mean + std / torch.sqrt(std**2 + sigmas[0] ** 2) * (sigmas[0] * noise - mean)
        errors.append((edm_sample(_gaussian_denoiser(mean, std), noise, sigmas) - exact).abs().max())
    assert_convergence_order(errors, [1 / n for n in steps], 2, tol=0.25)  # Heun
    assert errors[-1] < 0.02


def test_edm_stochastic_sampler_reaches_the_data_distribution():
    mean, std = torch.tensor([1.0, -2.0], dtype=F64), torch.tensor([0.5, 2.0], dtype=F64)
    g = torch.Generator().manual_seed(7)
    noise = torch.randn(20_000, 2, dtype=F64, generator=g)
    sigmas = torch.cat([EDM()(grids.uniform(127, dtype=F64)).sigma, torch.zeros(1, dtype=F64)])
    denoiser = _gaussian_denoiser(mean, std)
    x = edm_sample(denoiser, noise, sigmas, churn=40.0, s_tmin=0.05, s_tmax=50.0, generator=g)
    # 5 standard errors of the sample moments plus an allowance for the discretisation bias of 128 steps.
    assert_moments_close(x, mean, torch.diag(std**2), extra_tol=0.02)
    assert float((x - edm_sample(denoiser, noise, sigmas)).abs().mean()) > 0.1  # the churn noise acted


# ---------------------------------------------------------------- manifold and flow maps


def _rotation_problem():
    a = torch.tensor([[0.0, -1.0, 0.5], [1.0, 0.0, -0.3], [-0.5, 0.3, 0.0]], dtype=F64)

    def field(*, x, t):  # a time-scaled rotation, plus a normal component the solver must project away
        return (x @ a.T) * (1 + t[:, None]) + 0.7 * x

    x0 = Sphere(2).random_uniform(32, generator=torch.Generator().manual_seed(8), dtype=F64)
    return field, x0, x0 @ torch.linalg.matrix_exp(1.5 * a).T  # exact: exp((t + t^2/2) A) x_0 at t = 1


@pytest.mark.parametrize("method", ["euler", "midpoint", "rk4"])
def test_manifold_ode_stays_on_sphere_and_converges(method):
    field, x0, exact = _rotation_problem()
    sphere = Sphere(2)
    steps = [8, 16, 32, 64]
    errors = []
    for n in steps:
        traj = solve_ode_on_manifold(
            field, x0, grids.uniform(n, dtype=F64), manifold=sphere, method=method, return_trajectory=True
        )
        assert float((traj.states.norm(dim=-1) - 1).abs().max()) < 1e-12
        errors.append(float((traj.final - exact).norm(dim=-1).max()))
    assert_convergence_order(errors, [1 / n for n in steps], {"euler": 1, "midpoint": 2, "rk4": 4}[method], tol=0.25)


def test_sample_flow_map_composes_to_the_exact_map():
    problem = _g2g()
    x0 = _source(problem)
    zero, one = _ends(len(x0))
    exact = problem.flow_map(x0, zero, one)
    torch.testing.assert_close(sample_flow_map(problem.flow_map, x0, grids.uniform(1, dtype=F64)), exact)
    traj = sample_flow_map(problem.flow_map, x0, grids.uniform(7, dtype=F64), return_trajectory=True)
    torch.testing.assert_close(traj.final, exact)
    torch.testing.assert_close(traj.states[3], problem.flow_map(x0, zero, zero + 3 / 7))


# ---------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_value_errors_naming_the_argument():
    problem = _g2g()
    x = _source(problem, 4)
    grid = grids.uniform(4, dtype=F64)
    f = problem.velocity
    cases = [
        ("method", lambda: solve_ode(f, x, grid, method="rk5")),
        ("method", lambda: solve_ode(f, x, grid, method=3)),
        ("grid", lambda: solve_ode(f, x, torch.tensor([0.0, 0.5, 0.3, 1.0]))),
        ("grid", lambda: solve_ode(f, x, torch.tensor([0.0, 1.5]))),
        ("grid", lambda: solve_ode(f, x, torch.zeros(2, 3))),
        ("x_init", lambda: solve_ode(f, x * float("nan"), grid)),
        ("x_init", lambda: solve_ode(f, x.numpy(), grid)),
        ("x_init", lambda: solve_ode(f, x, grid, method="jvp_euler")),
        ("x_init", lambda: solve_ode(f, JVPState(x, x), grid, method="heun")),
        ("x_init.tangent", lambda: solve_ode(f, JVPState(x, x[:, :1]), grid, method="jvp_euler")),
        ("field", lambda: solve_ode("velocity", x, grid)),
        ("callback", lambda: solve_ode(f, x, grid, callback=1)),
        ("x_1", lambda: invert_ode(f, x * float("inf"), grid)),
        ("method", lambda: solve_ode_adaptive(f, x, grid, method="rk45")),
        ("atol", lambda: solve_ode_adaptive(f, x, grid, atol=0.0)),
        ("t_span", lambda: solve_ode_adaptive(f, x, torch.tensor([0.5]))),
        ("diffusion", lambda: solve_sde(f, -1.0, x, grid)),
        ("drift", lambda: solve_sde(None, 1.0, x, grid)),
        ("path", lambda: velocity_to_sde_drift(f, CondOT(), 1.0)),
        ("sigmas", lambda: edm_sample(f, x, torch.tensor([0.0, 1.0]))),
        ("sigmas", lambda: edm_sample(f, x, torch.tensor([1.0, -1.0]))),
        ("churn", lambda: edm_sample(f, x, torch.tensor([1.0, 0.0]), churn=-1.0)),
        ("x_init", lambda: solve_ode_on_manifold(f, torch.ones(4, 3), grid, manifold=Sphere(2))),
        ("manifold", lambda: solve_ode_on_manifold(f, x, grid, manifold="sphere")),
        ("method", lambda: solve_ode_on_manifold(f, x, grid, manifold=Sphere(1), method="heun")),
        ("flow_map", lambda: sample_flow_map(None, x, grid)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=name.replace(".", r"\.")):
            call()


def test_solve_ode_follows_input_device(device):
    problem = GaussianMixture.ring(8).to(device=device)
    x0 = problem.sample_source(16, generator=torch.Generator(device).manual_seed(0))
    with torch.inference_mode():
        y = solve_ode(problem.velocity, x0, grids.uniform(4), method="heun")
    assert y.device == x0.device and y.dtype == x0.dtype and bool(torch.isfinite(y).all())
    assert math.isfinite(float(y.abs().sum()))


def test_sde_noise_map_gives_geometric_brownian_motion_its_exact_moments():
    """dx = sigma x dW (a state-dependent noise map G(x) z = x z) is geometric Brownian motion: E[x_1] = x_0 and
    Var[x_1] = x_0^2 (e^(sigma^2) - 1) = 0.2840 for sigma = 0.5; Euler-Maruyama on 200 steps keeps the mean exactly
    (a martingale) and its variance x_0^2 ((1 + sigma^2 h)^n - 1) = 0.2834. Tolerances: 5 standard errors of 20000
    draws (mean s.e. 0.0038, variance s.e. about 0.009)."""
    batch, sigma = 20000, 0.5
    x0 = torch.ones(batch, 1, dtype=F64)
    zero = lambda x, t: torch.zeros_like(x)  # noqa: E731
    x1 = solve_sde(zero, sigma, x0, grids.uniform(200, dtype=F64), generator=torch.Generator().manual_seed(4),
                   noise_map=lambda x, z: x * z)  # fmt: skip
    assert abs(float(x1.mean()) - 1) < 5 * 0.0038
    assert abs(float(x1.var()) - ((1 + sigma**2 / 200) ** 200 - 1)) < 5 * 0.009
    with pytest.raises(ValueError, match="noise_map"):
        solve_sde(zero, 1.0, x0, grids.uniform(2, dtype=F64), noise_map="x")


def test_edm_sample_takes_per_sample_noise_levels():
    """(N + 1, B) levels: each sample solved on its own column equals a run with that column alone."""
    from flowlab.core.solvers import edm_sample

    def denoiser(*, x, sigma):
        return 0.2 + 0.25 / (0.25 + sigma.reshape(-1, 1) ** 2) * (x - 0.2)

    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(3, 2, generator=g, dtype=torch.float64)
    starts = torch.tensor([0.5, 2.0, 9.0], dtype=torch.float64)
    cols = torch.stack(
        [
            torch.cat([torch.linspace(float(s), 0.01, 6, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)])
            for s in starts
        ],
        1,
    )
    out = edm_sample(denoiser, None, cols, x_init=x0)
    for i in range(3):
        alone = edm_sample(denoiser, None, cols[:, i], x_init=x0[i : i + 1])
        torch.testing.assert_close(out[i : i + 1], alone)
    with pytest.raises(ValueError, match="0 for every sample or for none"):
        bad = cols.clone()
        bad[-1, 0] = 0.001
        edm_sample(denoiser, None, bad, x_init=x0)
    with pytest.raises(ValueError, match="churn"):
        edm_sample(denoiser, None, cols, x_init=x0, churn=1.0)
