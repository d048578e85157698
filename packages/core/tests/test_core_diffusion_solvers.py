"""DDIM / DPM-Solver++ sampling and inversion against closed forms and diffusers' schedulers.

The analytic problem: data x_1 ~ N(mu, diag(s^2)) on a VP schedule. Its exact denoiser is
E[x_1 | x_t = x] = mu + alpha s^2 / (alpha^2 s^2 + sigma^2) (x - alpha mu), and its probability-flow ODE moves each
point along x_t = alpha_t mu + sqrt(C_t / C_s) (x_s - alpha_s mu), C_t = alpha_t^2 s^2 + sigma_t^2, so every
sampler's endpoint can be compared with the exact flow.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from flowlab.core import grids
from flowlab.core.schedules import VP, CondOT, DiscreteVP
from flowlab.core.solvers.diffusion import (
    MultistepHistory,
    dpmpp_step,
    invert,
    sample_diffusion,
)
from flowlab.core.solvers.trajectory import StepInfo, Trajectory
from flowlab.core.testing.asserts import assert_convergence_order, assert_moments_close

F64 = torch.float64
SCHEDULE = VP()
MU = torch.tensor([0.5, -1.0], dtype=F64)
S2 = torch.tensor([0.3**2, 1.5**2], dtype=F64)


def _coefficients(t, x):
    """alpha_t, sigma_t: (1, 1) for the one time shared by the batch (the samplers pass a constant t: (B,))."""
    assert bool((t == t[0]).all())
    out = SCHEDULE(t[:1, None].to(x.dtype))
    return out.alpha, out.sigma


def denoiser(x, t):
    """Exact data prediction E[x_1 | x_t = x]."""
    (a, s), mu, s2 = _coefficients(t, x), MU.to(x), S2.to(x)
    return mu + a * s2 / (a**2 * s2 + s**2) * (x - a * mu)


def score_model(x, t):
    """Exact score of p_t = N(alpha mu, alpha^2 s^2 + sigma^2)."""
    (a, s), mu, s2 = _coefficients(t, x), MU.to(x), S2.to(x)
    return -(x - a * mu) / (a**2 * s2 + s**2)


def epsilon_model(x, t):
    return -_coefficients(t, x)[1] * score_model(x, t)


def exact_flow(x, s, t):
    """The probability-flow ODE's solution from time s to time t (floats)."""
    out_s, out_t = SCHEDULE(torch.tensor(s, dtype=F64)), SCHEDULE(torch.tensor(t, dtype=F64))
    c_s, c_t = out_s.alpha**2 * S2 + out_s.sigma**2, out_t.alpha**2 * S2 + out_t.sigma**2
    return out_t.alpha * MU + torch.sqrt(c_t / c_s) * (x - out_s.alpha * MU)


def noise(n=256, seed=0):
    return torch.randn(n, 2, generator=torch.Generator().manual_seed(seed), dtype=F64)


T_END = 0.99


# ------------------------------------------------------------------------------------------------------ sampling


@pytest.mark.parametrize("method", ["ddim", "dpmpp_2m", "dpmpp_3m"])
def test_prediction_kinds_give_the_same_samples(method):
    z, grid = noise(64), grids.uniform(12, end=T_END, dtype=F64)
    ref = sample_diffusion(denoiser, z, grid, schedule=SCHEDULE, prediction="data", method=method)
    for model, kind in ((score_model, "score"), (epsilon_model, "epsilon")):
        out = sample_diffusion(model, z, grid, schedule=SCHEDULE, prediction=kind, method=method)
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_convergence_orders_on_the_gaussian_flow():
    """Endpoint error against the exact flow: DDIM order 1, 2M order 2, 3M above 2.5 (warm-up limits it later)."""
    z, t0 = noise(), 0.0
    truth = exact_flow(z, t0, T_END)
    steps = [16, 32, 64]
    errors = {}
    for method in ("ddim", "dpmpp_2m", "dpmpp_3m"):
        errors[method] = []
        for n in steps:
            grid = grids.logsnr_uniform(n, SCHEDULE, t_start=t0, t_end=T_END, dtype=F64)
            x = sample_diffusion(
                denoiser, z, grid, schedule=SCHEDULE, prediction="data", method=method, lower_order_final=False
            )
            errors[method].append(float((x - truth).abs().max()))
    h = [1 / n for n in steps]
    assert_convergence_order(errors["ddim"], h, 1.0, tol=0.15)
    assert_convergence_order(errors["dpmpp_2m"], h, 2.0, tol=0.25)
    assert assert_convergence_order(errors["dpmpp_3m"], h, 3.5, tol=1.0) > 2.5
    # higher order is more accurate at equal NFE
    assert all(a > b > c for a, b, c in zip(errors["ddim"], errors["dpmpp_2m"], errors["dpmpp_3m"], strict=True))


def test_ddim_reaches_the_data_distribution():
    """Samples of the exact t0 marginal moved by DDIM: their moments approach those of the same samples moved by the
    exact flow (error ~ 1/n, 4x smaller per 4x steps up to a margin), and pass a 5-sigma moment test against the
    analytic t1 marginal."""
    gen = torch.Generator().manual_seed(1)
    n_samples, t0 = 5_000, 0.0
    a0, s0 = SCHEDULE(torch.tensor(t0, dtype=F64)).alpha, SCHEDULE(torch.tensor(t0, dtype=F64)).sigma
    x0 = a0 * (MU + S2.sqrt() * torch.randn(n_samples, 2, generator=gen, dtype=F64))
    x0 = x0 + s0 * torch.randn(n_samples, 2, generator=gen, dtype=F64)
    target_var = exact_flow(x0, t0, T_END).var(0)
    var_errors = []
    for n in (10, 40, 160):
        grid = grids.uniform(n, end=T_END, dtype=F64)
        x = sample_diffusion(denoiser, x0, grid, schedule=SCHEDULE, prediction="data", method="ddim")
        var_errors.append(float((x.var(0) - target_var).abs().max()))
    assert all(a > 2.5 * b for a, b in itertools.pairwise(var_errors)), var_errors
    a1, s1 = SCHEDULE(torch.tensor(T_END, dtype=F64)).alpha, SCHEDULE(torch.tensor(T_END, dtype=F64)).sigma
    assert_moments_close(x, a1 * MU, torch.diag(a1**2 * S2 + s1**2), num_sigma=5.0)


def test_ddpm_ancestral_sampling_reaches_the_data_distribution():
    """Ancestral DDPM from the exact first-grid marginal with the exact denoiser: 5-sigma moment test against the data
    Gaussian on a 200-step DiscreteVP (its grid k/K ends at the data), reproducible from the generator, and
    stochastic (a second generator gives different samples with the same moments)."""
    schedule = DiscreteVP.linear(200)
    grid = torch.linspace(0, 1, 201, dtype=F64)[1:]  # t = 1/K .. 1: alpha > 0 at the noise end

    def exact(x, t):
        out = schedule(t[:1, None].to(x.dtype))
        a, s = out.alpha, out.sigma
        return MU + a * S2 / (a**2 * S2 + s**2) * (x - a * MU)

    a0, s0 = (v[0] for v in (schedule(grid[:1]).alpha, schedule(grid[:1]).sigma))
    start = a0 * (MU + S2.sqrt() * noise(4000, seed=3)) + s0 * noise(4000, seed=4)  # the exact grid[0] marginal
    runs = [
        sample_diffusion(
            exact,
            start,
            grid,
            schedule=schedule,
            prediction="data",
            method="ddpm",
            generator=torch.Generator().manual_seed(seed),
        )
        for seed in (0, 0, 1)
    ]
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
    assert float((runs[0] - runs[2]).abs().mean()) > 0.1
    for x in (runs[0], runs[2]):
        assert_moments_close(x, MU, torch.diag(S2), num_sigma=5.0)
    with pytest.raises(ValueError, match="generator"):
        sample_diffusion(exact, start, grid, schedule=schedule, prediction="data", method="ddpm", generator=1)


def test_grid_ending_at_one_returns_the_data_prediction():
    z, grid = noise(32), grids.uniform(8, dtype=F64)
    for method in ("ddim", "dpmpp_2m", "dpmpp_3m"):
        traj = sample_diffusion(
            denoiser, z, grid, schedule=SCHEDULE, prediction="data", method=method, return_trajectory=True
        )
        assert isinstance(traj, Trajectory) and traj.states.shape == (9, 32, 2)
        expected = denoiser(traj.states[-2], grid[-2].expand(32))
        torch.testing.assert_close(traj.states[-1], expected, rtol=1e-12, atol=1e-12)


def test_grid_ending_before_one_differs_from_the_data_prediction():
    z, grid = noise(32), grids.uniform(8, end=T_END, dtype=F64)
    traj = sample_diffusion(denoiser, z, grid, schedule=SCHEDULE, prediction="data", return_trajectory=True)
    assert not torch.allclose(traj.states[-1], denoiser(traj.states[-2], grid[-2].expand(32)))


def test_callback_and_trajectory_agree():
    z, grid = noise(8), grids.uniform(5, end=T_END, dtype=F64)
    seen: list[StepInfo] = []
    traj = sample_diffusion(
        denoiser,
        z,
        grid,
        schedule=SCHEDULE,
        prediction="data",
        method="dpmpp_2m",
        return_trajectory=True,
        callback=seen.append,
    )
    assert [s.step for s in seen] == list(range(5))
    torch.testing.assert_close(torch.stack([s.x for s in seen]), traj.states[1:])
    torch.testing.assert_close(seen[0].t, torch.zeros(8, dtype=F64))


def test_history_is_an_explicit_value():
    x, d = noise(4), noise(4, seed=1)
    h = MultistepHistory().push(d, torch.tensor(0.5), keep=2).push(x, torch.tensor(0.7), keep=2)
    assert len(h) == 2 and h.data[0] is x and float(h.lambdas[1]) == 0.5
    assert len(h.push(d, torch.tensor(1.0), keep=2)) == 2
    with pytest.raises(ValueError, match="order"):
        dpmpp_step(x, d, MultistepHistory(), s=torch.tensor(0.2), t=torch.tensor(0.3), schedule=SCHEDULE, order=2)


# ------------------------------------------------------------------------------------------------------ diffusers


def _linear_eps_model(dtype):
    gen = torch.Generator().manual_seed(3)
    w = 0.3 * torch.randn(6, 6, generator=gen, dtype=dtype)
    b = torch.randn(6, generator=gen, dtype=dtype)

    def model(x, t):
        return x @ w + b * t[:, None]

    return model


def _scaled_linear(scheduler_cls, **kwargs):
    return scheduler_cls(
        num_train_timesteps=1000, beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", **kwargs
    )


def _run_diffusers(scheduler, model, x, schedule):
    for k in scheduler.timesteps:
        t = schedule.time_of(k.to(x.dtype)).expand(x.shape[0])
        x = scheduler.step(model(x, t), k, x).prev_sample
    return x


@pytest.mark.parametrize(
    ("config", "end_at_one"),
    [
        ({"set_alpha_to_one": False, "steps_offset": 1, "timestep_spacing": "leading"}, False),
        ({"set_alpha_to_one": True, "timestep_spacing": "trailing"}, True),
    ],
)
def test_ddim_matches_diffusers(config, end_at_one):
    diffusers = pytest.importorskip("diffusers")
    scheduler = _scaled_linear(diffusers.DDIMScheduler, clip_sample=False, prediction_type="epsilon", **config)
    scheduler.set_timesteps(10)
    schedule = DiscreteVP.from_diffusers(scheduler)
    times = schedule.time_of(scheduler.timesteps.to(F64))
    grid = torch.cat([times, torch.tensor([1.0 if end_at_one else 1 - 1 / 1000], dtype=F64)])
    model = _linear_eps_model(F64)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4), dtype=F64)
    ours = sample_diffusion(model, x, grid, schedule=schedule, prediction="epsilon", method="ddim")
    torch.testing.assert_close(ours, _run_diffusers(scheduler, model, x, schedule), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("steps", "final_sigmas_type", "lower_order_final"),
    [(10, "sigma_min", True), (10, "zero", True), (20, "sigma_min", False)],
)
def test_dpmpp_2m_matches_diffusers(steps, final_sigmas_type, lower_order_final):
    """diffusers lowers the final order only below 15 steps; with 20 steps it keeps order 2 to the end."""
    diffusers = pytest.importorskip("diffusers")
    scheduler = _scaled_linear(
        diffusers.DPMSolverMultistepScheduler,
        algorithm_type="dpmsolver++",
        solver_order=2,
        prediction_type="epsilon",
        final_sigmas_type=final_sigmas_type,
        lower_order_final=True,
    )
    scheduler.set_timesteps(steps)
    schedule = DiscreteVP.from_diffusers(scheduler)
    end = 1.0 if final_sigmas_type == "zero" else 1 - 1 / 1000
    grid = torch.cat([schedule.time_of(scheduler.timesteps.to(F64)), torch.tensor([end], dtype=F64)])
    model = _linear_eps_model(torch.float32)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(5))
    ours = sample_diffusion(
        model, x, grid, schedule=schedule, prediction="epsilon", method="dpmpp_2m", lower_order_final=lower_order_final
    )
    torch.testing.assert_close(ours, _run_diffusers(scheduler, model, x, schedule), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------------------------------- inversion


def test_naive_ddim_inversion_error_shrinks_like_one_over_steps():
    """Naive inversion of DDIM samples recovers the starting noise with max error ~ 22 / n (n steps)."""
    z = noise()
    errors = []
    steps = [20, 40, 80]
    for n in steps:
        grid = grids.uniform(n, end=T_END, dtype=F64)
        x = sample_diffusion(denoiser, z, grid, schedule=SCHEDULE, prediction="data", method="ddim")
        inv = invert(denoiser, x, grid, schedule=SCHEDULE, prediction="data", method="ddim")
        errors.append(float((inv.noise - z).abs().max()))
        assert int(inv.iterations.sum()) == 0 and inv.sweeps == 1 and inv.nfe == n + 1
    assert_convergence_order(errors, [1 / n for n in steps], 1.0, tol=0.2)
    assert errors[-1] < 0.35


@pytest.mark.parametrize("method", ["ddim", "dpmpp_2m"])
def test_exact_inversion_recovers_the_noise(method):
    """Exact inversion drives every step's residual below tol=1e-9 (float64) and recovers the noise to 1e-7,
    far better than naive inversion on the same grid."""
    z, grid = noise(), grids.uniform(10, end=T_END, dtype=F64)
    x = sample_diffusion(denoiser, z, grid, schedule=SCHEDULE, prediction="data", method=method)
    naive = invert(denoiser, x, grid, schedule=SCHEDULE, prediction="data", method=method)
    exact = invert(denoiser, x, grid, schedule=SCHEDULE, prediction="data", method=method, exact=True, tol=1e-9)
    assert exact.residuals.shape == (10, 256) and exact.iterations.shape == (10,)
    assert float(exact.residuals.max()) < 1e-9
    assert float(naive.residuals.max()) > 1e-2
    assert float((exact.noise - z).abs().max()) < 1e-7
    assert float((naive.noise - z).abs().max()) > 0.1
    assert (exact.sweeps == 1) == (method == "ddim")
    assert exact.nfe == naive.nfe + int(exact.iterations.sum())


def test_exact_inversion_default_tolerance_and_decreasing_grid():
    z, grid = noise(64), grids.uniform(10, end=T_END, dtype=F64)
    x = sample_diffusion(denoiser, z, grid, schedule=SCHEDULE, prediction="data")
    inv = invert(denoiser, x, grid.flip(0), schedule=SCHEDULE, prediction="data", exact=True)
    assert float(inv.residuals.max()) < 1e-6
    assert float((inv.noise - z).abs().max()) < 1e-4


def test_exact_inversion_on_a_discrete_schedule_in_float32():
    """SD's schedule, 20 DDIM steps ending at 1 - 1/K, epsilon model, float32: the residual stalls near rounding
    (the iteration stops instead of spinning) and the noise is still recovered far better than naively."""
    schedule = DiscreteVP.scaled_linear()
    grid = grids.uniform(20, end=1 - 1 / 1000)
    model = _linear_eps_model(torch.float32)
    z = torch.randn(8, 6, generator=torch.Generator().manual_seed(6))
    x = sample_diffusion(model, z, grid, schedule=schedule, prediction="epsilon")
    naive = invert(model, x, grid, schedule=schedule, prediction="epsilon")
    exact = invert(model, x, grid, schedule=schedule, prediction="epsilon", exact=True, max_iter=20)
    assert float((exact.noise - z).abs().max()) < 1e-3 < float((naive.noise - z).abs().max())
    assert int(exact.iterations.max()) <= 20


def test_sampling_and_inversion_follow_the_device(device):
    """x on `device` in float32 with a CPU float64 grid: results stay on x's device and dtype and match the CPU."""
    z, grid = noise(16).float(), grids.uniform(8, end=T_END, dtype=F64)
    kwargs = {"schedule": SCHEDULE, "prediction": "data", "method": "dpmpp_2m"}
    x = sample_diffusion(denoiser, z.to(device), grid, **kwargs)
    assert x.device.type == device.type and x.dtype == torch.float32
    torch.testing.assert_close(x.cpu(), sample_diffusion(denoiser, z, grid, **kwargs), rtol=1e-5, atol=1e-5)
    inv = invert(denoiser, x, grid, exact=True, tol=1e-5, **kwargs)
    assert inv.noise.device.type == device.type and inv.residuals.device.type == device.type
    assert float((inv.noise.cpu() - z).abs().max()) < 1e-3


# ---------------------------------------------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_naming_the_argument():
    z, grid = noise(4), grids.uniform(4, end=T_END, dtype=F64)
    kwargs = {"schedule": SCHEDULE, "prediction": "data"}
    cases = [
        ("method", lambda: sample_diffusion(denoiser, z, grid, method="euler", **kwargs)),
        ("method", lambda: invert(denoiser, z, grid, method="dpmpp_3m", **kwargs)),
        ("prediction", lambda: sample_diffusion(denoiser, z, grid, schedule=SCHEDULE, prediction="noise")),
        ("schedule", lambda: sample_diffusion(denoiser, z, grid, schedule="vp", prediction="data")),
        ("x_init", lambda: sample_diffusion(denoiser, z * math.nan, grid, **kwargs)),
        ("x_init", lambda: sample_diffusion(denoiser, z.long(), grid, **kwargs)),
        ("x_data", lambda: invert(denoiser, torch.tensor(1.0), grid, **kwargs)),
        ("grid", lambda: sample_diffusion(denoiser, z, grid.flip(0), **kwargs)),
        ("grid", lambda: sample_diffusion(denoiser, z, torch.tensor([0.0, 0.5, 0.4]), **kwargs)),
        ("grid", lambda: sample_diffusion(denoiser, z, grids.uniform(4), schedule=CondOT(), prediction="data")),
        ("grid", lambda: invert(denoiser, z, grids.uniform(4, dtype=F64), **kwargs)),
        ("model", lambda: sample_diffusion(lambda x, t: x[:, :1], z, grid, **kwargs)),
        ("model", lambda: sample_diffusion(None, z, grid, **kwargs)),
        ("tol", lambda: invert(denoiser, z, grid, exact=True, tol=0.0, **kwargs)),
        ("max_iter", lambda: invert(denoiser, z, grid, exact=True, max_iter=0, **kwargs)),
        ("callback", lambda: sample_diffusion(denoiser, z, grid, callback=3, **kwargs)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=name):
            call()
