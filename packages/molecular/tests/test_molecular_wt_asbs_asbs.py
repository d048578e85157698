"""The ASBS sampler: EDM noise, the base bridge, the corrector target, centre-of-mass-free sampling, training on a
Gaussian and path-space importance weights."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from flowlab.core.grids import uniform
from flowlab.core.paths.bridge import BridgePath
from flowlab.core.solvers import solve_sde
from flowlab.molecular.wt_asbs import ASBS, ASBSConfig, EDMNoise, EnergyForces, FourWell


def test_edm_noise_cumulative_variance_closed_form():
    noise = EDMNoise(6.0, 1e-3, 3.0)
    t = torch.linspace(0, 1, 20001, dtype=torch.float64)
    g2 = noise.g(t) ** 2
    numeric = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumulative_trapezoid(g2, t)])
    torch.testing.assert_close(noise.variance(t), numeric, rtol=1e-6, atol=1e-6)
    assert noise.total == pytest.approx(float(numeric[-1]), rel=1e-6)
    torch.testing.assert_close(noise.remaining(t), noise.total - noise.variance(t), rtol=0, atol=1e-12)
    # near t = 1 the remainder is about sigma_min^2 (1 - t), far below float32's resolution of total - variance
    near = torch.tensor([1 - 1e-4], dtype=torch.float32)
    assert float(noise.remaining(near)) == pytest.approx(1e-6 * 1e-4, rel=0.01)


def test_base_bridge_matches_the_zero_drift_sde_and_core_bridge():
    noise = EDMNoise(2.0, 0.01)
    g = torch.Generator().manual_seed(7)
    n, t_mid = 4000, 0.3
    x0 = torch.zeros(n, 1, dtype=torch.float64)
    grid = uniform(400).to(torch.float64)
    traj = solve_sde(lambda x, t: torch.zeros_like(x), noise.g, x0, grid, generator=g, return_trajectory=True)
    k = int(t_mid * 400)
    xt, x1 = traj.states[k][:, 0], traj.states[-1][:, 0]
    # regress X_t on X_1: E[X_t | X_1] = r X_1 (x0 = 0), Var = r (1 - r) V
    r_sim = float((xt * x1).mean() / (x1 * x1).mean())
    resid = float((xt - r_sim * x1).var())
    r = float(noise.variance(torch.tensor(t_mid, dtype=torch.float64)) / noise.total)
    assert r_sim == pytest.approx(r, abs=0.03)
    assert resid == pytest.approx(r * (1 - r) * noise.total, rel=0.08)
    # the sampler's closed form draws the same law as the core BridgePath
    model = ASBS(FourWell(), noise, ASBSConfig(), source_std=1.0, dtype=torch.float64, generator=g)
    a, b = torch.zeros(n, 2, dtype=torch.float64), torch.ones(n, 2, dtype=torch.float64)
    tt = torch.full((n,), t_mid, dtype=torch.float64)
    ours = model.bridge_sample(a, b, tt)
    core = BridgePath(noise.variance).sample(a, b, tt, generator=g).x_t
    torch.testing.assert_close(ours.mean(0), core.mean(0), atol=0.05, rtol=0)
    torch.testing.assert_close(ours.var(0), core.var(0), atol=0.05, rtol=0.05)


def test_bridge_sample_keeps_its_spread_near_t_1_in_float32():
    """At t = 1 - 1e-4 the bridge's 1 - r is about 1e-8, below float32's resolution of r: the float32 sample still has
    the spread sqrt(r (1 - r) V_tot) (about 1e-4) around X_1 (float32 r gave none)."""
    noise = EDMNoise(2.0, 0.01)
    g = torch.Generator().manual_seed(3)
    model = ASBS(FourWell(), noise, ASBSConfig(), source_std=1.0, generator=g)
    n = 8000
    x0, x1 = torch.zeros(n, 2), torch.full((n, 2), 0.5)
    t = torch.full((n,), 1 - 1e-4)
    xt = model.bridge_sample(x0, x1, t)
    assert xt.dtype == torch.float32
    keep = float(noise.remaining(t[:1].double()) / noise.total)
    assert keep < 1e-7
    spread = math.sqrt(keep * (1 - keep) * noise.total)
    assert float((xt - x1).std()) == pytest.approx(spread, rel=0.05)


def test_corrector_target_is_the_base_transition_score():
    noise = EDMNoise(2.0, 0.01)
    x0 = torch.randn(6, 3, dtype=torch.float64)
    x1 = (x0 + torch.randn(6, 3, dtype=torch.float64)).requires_grad_(True)
    logp = torch.distributions.Normal(x0, math.sqrt(noise.total)).log_prob(x1).sum()
    (score,) = torch.autograd.grad(logp, x1)
    torch.testing.assert_close((x0 - x1.detach()) / noise.total, score)


def test_molecular_sampling_keeps_the_centre_of_mass_of_the_source():
    """Source noise, SDE increments and the controlled drift carry no centre-of-mass component for molecules: with a
    random (non-zero) controller, samples keep the source's centre of mass exactly."""

    class Harmonic:
        dim, kT, n_evals = 12, 1.0, 0

        def energy_and_forces(self, x):
            raise AssertionError("not called")

    model = ASBS(Harmonic(), EDMNoise(1.0, 0.01), ASBSConfig(), source_std=1.0, atom_dim=3, dtype=torch.float64)
    x0 = model._source(100, torch.Generator().manual_seed(8))
    assert float(x0.view(100, 4, 3).mean(1).abs().max()) < 1e-6
    for p in model.controller.parameters():
        torch.nn.init.normal_(p, std=0.5)
    x0, x1 = model.sample(100, generator=torch.Generator().manual_seed(9))
    assert float((x1 - x0).abs().max()) > 0.1  # the samples moved
    assert float(x1.view(100, 4, 3).mean(1).abs().max()) < 1e-6


def test_a_per_coordinate_source_std_sets_each_coordinate_width():
    """source_std (D,): the source's std along each coordinate (chi-square interval for 20 000 draws: a relative
    error of 3 % is over 6 standard errors); wrong shapes and non-positive values are named."""
    model = ASBS(FourWell(), EDMNoise(1.0, 0.01), ASBSConfig(), source_std=torch.tensor([0.1, 2.0]))
    x0 = model._source(20_000, torch.Generator().manual_seed(3))
    torch.testing.assert_close(x0.std(0), torch.tensor([0.1, 2.0]), rtol=0.03, atol=0)
    for bad in (torch.tensor([1.0, 0.0]), torch.ones(3), -1.0):
        with pytest.raises(ValueError, match="source_std"):
            ASBS(FourWell(), EDMNoise(1.0, 0.01), ASBSConfig(), source_std=bad)


def test_asbs_learns_a_gaussian_target():
    """Tiny ASBS run on E = |x - m|^2 / (2 s^2): sample mean and std within 0.15 of (m, s)."""

    class Gauss:
        dim, kT, n_evals = 2, 1.0, 0
        m, s = torch.tensor([1.0, -0.5]), 0.5

        def energy_and_forces(self, x):
            self.n_evals += len(x)
            d = x - self.m
            return type("EF", (), {"energy": (d**2).sum(-1) / (2 * self.s**2), "forces": -d / self.s**2})()

    cfg = ASBSConfig(
        stages="ACA",
        adjoint_epochs=4,
        corrector_epochs=2,
        steps_per_epoch=25,
        sde_steps=30,
        lr=3e-3,
        batch_size=128,
        new_samples=128,
        hidden=(32, 32),
    )
    model = ASBS(Gauss(), EDMNoise(2.0, 0.01), cfg, source_std=1.0, generator=torch.Generator().manual_seed(10))
    model.train()
    _, x1 = model.sample(2000)
    assert float((x1.mean(0) - Gauss.m).abs().max()) < 0.15
    assert float((x1.std(0) - Gauss.s).abs().max()) < 0.15
    assert model.potential.n_evals == 4 * 2 * 128  # only adjoint epochs call the energy
    assert model.log.stage == ["A"] * 4 + ["C"] * 2 + ["A"] * 4  # one record per epoch, its mean loss finite
    assert all(math.isfinite(v) for v in model.log.loss)


def test_a_diverging_run_stops_after_its_patience_and_a_calm_one_runs_its_curriculum():
    """Median energies (kT) scripted per adjoint epoch: 3, -5, 200, 1, 200, NaN, 200, ... With stop_above_kT 100 and
    patience 3 the lowest is -5; epoch 3 is above, epoch 4 resets the count, epochs 5-7 (NaN counts) stop the run
    after epoch 7 of 10; with stop_above_kT 0 it runs all 10."""

    class Scripted:
        dim, kT = 2, 1.0

        def __init__(self):
            self.n_evals, self.calls = 0, 0
            self.script = [3.0, -5.0, 200.0, 1.0, 200.0, math.nan] + [200.0] * 10

        def energy_and_forces(self, x):
            self.n_evals += len(x)
            e = torch.full((len(x),), self.script[self.calls])
            self.calls += 1
            return type("EF", (), {"energy": e, "forces": torch.zeros_like(x)})()

    cfg = ASBSConfig(stages="A", adjoint_epochs=10, steps_per_epoch=1, sde_steps=2, batch_size=4, new_samples=4,
                     hidden=(8,), stop_above_kT=100.0, stop_patience=3)  # fmt: skip
    for threshold, epochs, stopped in ((100.0, 7, 7), (0.0, 10, None)):
        model = ASBS(Scripted(), EDMNoise(2.0, 0.01), replace(cfg, stop_above_kT=threshold), source_std=1.0,
                     generator=torch.Generator().manual_seed(0))  # fmt: skip
        log = model.train()
        assert log.stopped_epoch == stopped
        assert len(log.stage) == epochs and model.potential.n_evals == 4 * epochs
        torch.testing.assert_close(torch.tensor(log.median_energy_kT[:6]), torch.tensor(model.potential.script[:6]),
                                   equal_nan=True)  # fmt: skip
    with pytest.raises(ValueError, match="stop_above_kT"):
        ASBSConfig(stop_above_kT=-1.0)
    with pytest.raises(ValueError, match="stop_patience"):
        ASBSConfig(stop_patience=0)


def test_warm_start_bridge_matching_carries_the_source_to_the_data():
    """Bridge matching alone (1000 steps, no energy calls) on 4000 draws of N(m, diag(s^2)): the controlled SDE's
    samples have the data's mean and std within 0.12, where the untrained (zero) controller gives the source's; a
    config without warm-start steps, or data of the wrong shape or with a NaN, is refused by name."""
    m, s = torch.tensor([1.5, -1.0]), torch.tensor([0.3, 0.8])
    data = m + s * torch.randn(4000, 2, generator=torch.Generator().manual_seed(1))

    class Untouchable:
        dim, kT, n_evals = 2, 1.0, 0

        def energy_and_forces(self, x):
            raise AssertionError("the warm start must not call the energy")

    cfg = ASBSConfig(sde_steps=60, batch_size=256, hidden=(64, 64), warm_start_steps=1000, warm_start_lr=3e-3)
    model = ASBS(Untouchable(), EDMNoise(2.0, 0.01), cfg, source_std=1.0, generator=torch.Generator().manual_seed(2))
    _, before = model.sample(4000)
    assert float((before.mean(0) - m).abs().max()) > 0.9  # the zero controller: the source's mean, 0
    assert math.isfinite(model.warm_start(data))
    _, x1 = model.sample(4000)
    assert float((x1.mean(0) - m).abs().max()) < 0.12
    assert float((x1.std(0) - s).abs().max()) < 0.12
    with pytest.raises(ValueError, match="data"):
        model.warm_start(data[:, :1])
    with pytest.raises(ValueError, match="data"):
        model.warm_start(torch.full((3, 2), float("nan")))
    with pytest.raises(ValueError, match="warm_start_steps"):
        ASBS(Untouchable(), EDMNoise(2.0, 0.01), ASBSConfig(), source_std=1.0).warm_start(data)
    with pytest.raises(ValueError, match="warm_start_steps"):
        ASBSConfig(warm_start_steps=-1)


def test_path_importance_weights_correct_a_wrong_control():
    """sample_weighted's weights are exact for the discrete chain whatever the control: with a constant push to the
    right (raw samples put 80 % of the mass where the target has 20 %), the weighted P(x > 0) and E[x] of a tilted
    2-D double well match quadrature within 4 s.e.; one energy call per sample."""

    class Tilted:
        dim, kT, n_evals = 2, 1.0, 0

        def energy_and_forces(self, x):
            self.n_evals += len(x)
            energy = 2.0 * (x[:, 0] ** 2 - 1) ** 2 + 0.8 * x[:, 0] + 0.5 * x[:, 1] ** 2
            return EnergyForces(energy=energy, forces=torch.zeros_like(x))

    class Push(torch.nn.Module):
        def forward(self, *, x, t):
            return torch.tensor([1.0, 0.0]).expand(x.shape)

    model = ASBS(Tilted(), EDMNoise(2.0, 0.01), ASBSConfig(sde_steps=40), source_std=0.1)
    model.controller = Push()
    n = 20000
    _, x1, log_w = model.sample_weighted(n, generator=torch.Generator().manual_seed(3))
    assert model.potential.n_evals == n and log_w.shape == (n,) and log_w.dtype == torch.float64
    w = torch.softmax(log_w, 0)
    ess = 1.0 / float((w**2).sum())
    s = torch.linspace(-3, 3, 6001, dtype=torch.float64)
    p_s = torch.softmax(-(2.0 * (s**2 - 1) ** 2 + 0.8 * s), 0)  # the y marginal factorises out
    truth_right, truth_mean = float(p_s[s > 0].sum()), float((p_s * s).sum())
    right = (x1[:, 0] > 0).double()
    se = math.sqrt(truth_right * (1 - truth_right) / ess)
    assert abs(float(right.mean()) - truth_right) > 10 * se  # the raw samples are wrong: the weights do the work
    assert abs(float((w * right).sum()) - truth_right) < 4 * se
    var_x = float((p_s * (s - truth_mean) ** 2).sum())
    assert abs(float((w * x1[:, 0].double()).sum()) - truth_mean) < 4 * math.sqrt(var_x / ess)


@pytest.mark.parametrize("atom_dim", [None, 3], ids=["toy", "molecule"])
def test_path_log_weights_equal_the_chain_density_ratio(atom_dim):
    """path_log_weights equals, up to one constant, log[P_base(path | X_0) e^{-E(X_1)} / p_base(X_1 | X_0)]
    - log P_u(path | X_0), rebuilt transition by transition from Gaussian densities (g at each step's left time,
    S the chain's own variance), for a state-dependent control; on a 2-atom molecule the noise is mean-free."""
    dim = 2 if atom_dim is None else 6

    class Quadratic:
        kT, n_evals = 1.0, 0

        def __init__(self):
            self.dim = dim

        def energy_and_forces(self, x):
            return EnergyForces(energy=0.5 * ((x - 0.3) ** 2).sum(-1), forces=-(x - 0.3))

    model = ASBS(Quadratic(), EDMNoise(1.5, 0.01), ASBSConfig(sde_steps=12, hidden=(16,)), source_std=0.2,
                 atom_dim=atom_dim, generator=torch.Generator().manual_seed(0))  # fmt: skip
    with torch.no_grad():
        for i, p in enumerate(model.controller.parameters()):
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(i)))
    gen = torch.Generator().manual_seed(1)
    n, grid = 64, uniform(12)
    x0 = torch.randn(n, dim, generator=gen)
    with torch.no_grad():
        traj = solve_sde(model._drift, model.noise.g, x0, grid, generator=gen, noise_projection=model._mean_free,
                         return_trajectory=True)  # fmt: skip
    log_w = model.path_log_weights(traj)
    x, normal = traj.states.double(), torch.distributions.Normal
    ref, total = torch.zeros(n, dtype=torch.float64), 0.0
    with torch.no_grad():
        for k in range(12):
            t, h = grid[k], float(grid[k + 1] - grid[k])
            std = float(model.noise.g(t)) * math.sqrt(h)
            mean_u = x[k] + model._drift(x=traj.states[k], t=t.expand(n)).double() * h
            ref += normal(x[k], std).log_prob(x[k + 1]).sum(-1) - normal(mean_u, std).log_prob(x[k + 1]).sum(-1)
            total += std**2
    ref += -0.5 * ((x[-1] - 0.3) ** 2).sum(-1) - normal(x[0], math.sqrt(total)).log_prob(x[-1]).sum(-1)
    assert float(ref.std()) > 0.5  # the weights vary: a constant error could not hide
    assert float((log_w - ref).std()) < 1e-3
