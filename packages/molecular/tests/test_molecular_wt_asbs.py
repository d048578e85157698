"""WT-ASBS: collective variables, the well-tempered bias, reweighting, the base bridge, energies and errors."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from flowlab.core.grids import uniform
from flowlab.core.paths.bridge import BridgePath
from flowlab.core.solvers import solve_sde
from flowlab.molecular.wt_asbs import (
    ASBS,
    BOHR_NM,
    EV_TO_KJMOL,
    HARTREE_TO_KJMOL,
    REACTANT,
    ASBSConfig,
    CVSet,
    DistanceCV,
    DistanceDifferenceCV,
    DistanceWalls,
    EDMNoise,
    EmbeddedToy,
    EnergyForces,
    FourWell,
    MuellerBrown,
    OpenMMPotential,
    TBLitePotential,
    TorsionCV,
    WellTemperedBias,
    delta_f_from_samples,
    kT_kjmol,
    langevin,
    mirror,
    pmf_quadrature,
    reaction_cv,
    reweight,
    sn2_potential,
    torsion_marginal_kl,
    torsion_w2,
)
from flowlab.molecular.wt_asbs.sn2 import NUMBERS as NUMBERS_SN2

DATA = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
ALDP = DATA / "alanine_dipeptide" / "openmm_tests"
needs_aldp = pytest.mark.skipif(
    not ALDP.is_dir(), reason=f"alanine_dipeptide data set not found under FLOWLAB_DATA={DATA}"
)
PHI, PSI = (4, 6, 8, 14), (6, 8, 14, 16)


def _numpy_dihedral(p0, p1, p2, p3) -> float:
    """Praxeolitic formula, written independently of TorsionCV (degrees)."""
    b0, b1, b2 = p0 - p1, p2 - p1, p3 - p2
    b1 = b1 / np.linalg.norm(b1)
    v = b0 - np.dot(b0, b1) * b1
    w = b2 - np.dot(b2, b1) * b1
    return float(np.degrees(np.arctan2(np.dot(np.cross(b1, v), w), np.dot(v, w))))


def _random_rotation(g: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))
    return q if torch.det(q) > 0 else -q


def _fd_grad(f, x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    out = torch.zeros_like(x)
    for j in range(x.shape[1]):
        e = torch.zeros_like(x)
        e[:, j] = eps
        out[:, j] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


# --- collective variables -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cv", [TorsionCV((0, 1, 2, 3)), DistanceCV(0, 2), DistanceDifferenceCV((0, 1), (1, 3))], ids=str
)
def test_cv_gradient_matches_finite_differences(cv):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 12, generator=g, dtype=torch.float64)
    torch.testing.assert_close(cv.jacobian(x), _fd_grad(cv, x), atol=1e-6, rtol=1e-5)


def test_torsion_matches_numpy_and_is_rigid_motion_invariant():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 12, generator=g, dtype=torch.float64)
    ref = [_numpy_dihedral(*xi.view(4, 3).numpy()) for xi in x]
    np.testing.assert_allclose(np.degrees(TorsionCV((0, 1, 2, 3))(x).numpy()), ref, atol=0.01)
    rot, shift = _random_rotation(g), torch.randn(3, generator=g, dtype=torch.float64)
    moved = (x.view(4, 4, 3) @ rot.T + shift).view(4, 12)
    np.testing.assert_allclose(np.degrees(TorsionCV((0, 1, 2, 3))(moved).numpy()), ref, atol=0.01)


def test_cvset_pullback_is_the_jacobian_transpose_product():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 12, generator=g, dtype=torch.float64)
    cvs = CVSet([TorsionCV((0, 1, 2, 3)), DistanceCV(1, 3)])
    w = torch.randn(3, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(cvs.pullback(x, w), torch.einsum("bk,bkd->bd", w, cvs.jacobian(x)))


# --- the bias grid ------------------------------------------------------------------------------------


def _bias2d(**kw) -> WellTemperedBias:
    base = dict(sigma=0.3, height=1.0, bias_factor=8.0, kT=2.494, periodic=True)
    return WellTemperedBias((-math.pi, -math.pi), (math.pi, math.pi), (60, 60), **{**base, **kw})


def test_single_hill_equals_periodic_gaussian_at_nodes():
    bias = _bias2d()
    centre = torch.tensor([[3.0, -3.05]], dtype=torch.float64)  # near the corner: the hill wraps
    heights = bias.add_hills(centre)
    assert float(heights) == pytest.approx(1.0)  # empty bias: full height
    n0, n1 = bias.nodes
    # independent periodic Gaussian: sum over images
    total = torch.zeros(60, 60, dtype=torch.float64)
    for k0 in (-1, 0, 1):
        for k1 in (-1, 0, 1):
            d0 = n0[:, None] - centre[0, 0] + 2 * math.pi * k0
            d1 = n1[None, :] - centre[0, 1] + 2 * math.pi * k1
            total += torch.exp(-(d0**2 + d1**2) / (2 * 0.3**2))
    torch.testing.assert_close(bias.values, total, atol=1e-9, rtol=0)


def test_bias_gradient_matches_finite_differences_and_wraps_continuously():
    bias = WellTemperedBias(
        (-math.pi, -math.pi),
        (math.pi, math.pi),
        (300, 300),
        sigma=0.3,
        height=1.0,
        bias_factor=8,
        kT=2.494,
        periodic=True,
    )
    g = torch.Generator().manual_seed(3)
    bias.add_hills((torch.rand(20, 2, generator=g, dtype=torch.float64) * 2 - 1) * math.pi)
    s = (torch.rand(50, 2, generator=g, dtype=torch.float64) * 2 - 1) * 3.0
    grad = bias(s).grad
    fd = _fd_grad(lambda z: bias(z).value, s, eps=float(bias.spacing[0]))
    # interpolated analytic gradient vs differences of the interpolated value: agree to the grid resolution
    assert float((grad - fd).abs().max()) < 0.05 * float(grad.abs().max()) + 1e-3
    edge = torch.tensor([[math.pi - 1e-9, 0.4], [-math.pi + 1e-9, 0.4]], dtype=torch.float64)
    v = bias(edge).value
    assert float((v[0] - v[1]).abs()) < 1e-6


def test_bias_forces_through_the_cv_jacobian_match_an_independent_evaluation():
    """-(dV/ds)(ds/dx) from the grid vs autograd of the analytic sum of Gaussians at phi(x)."""
    bias = WellTemperedBias(-math.pi, math.pi, 400, sigma=0.35, height=1.0, bias_factor=8, kT=1.0, periodic=True)
    centres = torch.tensor([[0.3], [-2.0], [2.9]], dtype=torch.float64)
    bias.add_hills(centres[:1])
    hs = torch.cat([torch.ones(1, dtype=torch.float64), bias.add_hills(centres[1:])])  # well-tempered heights
    assert bool((hs[1:] < 1).all())
    cvs = CVSet([TorsionCV((0, 1, 2, 3))])
    x = torch.randn(4, 12, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    forces = -cvs.pullback(x, bias(cvs(x)).grad)

    def analytic(xx):
        s = cvs(xx)[:, 0]
        d = s[:, None] - centres[:, 0][None]
        d = d - 2 * math.pi * torch.round(d / (2 * math.pi))
        return (torch.exp(-0.5 * (d / 0.35) ** 2) * hs[None]).sum(-1)

    xg = x.clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(analytic(xg).sum(), xg)
    torch.testing.assert_close(forces, -ref, atol=2e-3, rtol=2e-3)


def test_free_energy_at_points_interpolates_the_grid_estimate():
    """free_energy(s) at the grid nodes equals free_energy() there (both shifted to min 0 over the same nodes)."""
    bias = WellTemperedBias(-2.0, 2.0, 41, sigma=0.3, height=0.5, bias_factor=5.0, kT=1.0)
    bias.add_hills(torch.tensor([[-0.5], [0.2], [1.1]], dtype=torch.float64))
    assert torch.allclose(bias.free_energy(bias.nodes[0][:, None]), bias.free_energy(), atol=1e-12)
    assert float(bias.free_energy().min()) == 0.0 and float(bias.free_energy().max()) > 0


def test_well_tempered_limit_on_a_1d_toy():
    """Depositing at exact samples of exp(-(F + V)) drives V -> -(1 - 1/gamma) F (+ const) within 0.2 kT."""
    g = torch.Generator().manual_seed(5)
    gamma, kT = 4.0, 1.0
    bias = WellTemperedBias(-2.5, 2.5, 251, sigma=0.15, height=0.05, bias_factor=gamma, kT=kT)
    s_grid = bias.nodes[0]
    free = 3.0 * (s_grid**2 - 1) ** 2 + 0.5 * s_grid  # exact F in kT
    for _ in range(400):
        logp = -(free + bias.values) / kT
        p = torch.softmax(logp, 0)
        idx = torch.multinomial(p, 64, replacement=True, generator=g)
        jitter = (torch.rand(64, generator=g, dtype=torch.float64) - 0.5) * bias.spacing[0]
        bias.add_hills((s_grid[idx] + jitter).clamp(-2.5, 2.5)[:, None])
    target = -(1 - 1 / gamma) * free
    mask = (free - free.min()) < 4.0  # the populated range
    diff = (bias.values - target)[mask]
    assert float((diff - diff.mean()).abs().max()) < 0.2


def test_reweighting_recovers_the_unbiased_expectation():
    """Samples from exp(-(E + V)) weighted by exp(V) reproduce E_p[f] of exp(-E) on a 1-D double well (3 s.e.)."""
    g = torch.Generator().manual_seed(6)
    s = torch.linspace(-3, 3, 6001, dtype=torch.float64)
    energy = 2.0 * (s**2 - 1) ** 2 + 0.8 * s
    vbias = 1.5 * torch.exp(-((s + 1) ** 2) / 0.5)  # a bias flattening the deeper well
    f = (s > 0).to(torch.float64)  # probability of the right well
    truth = float((torch.softmax(-energy, 0) * f).sum())
    n = 20000
    idx = torch.multinomial(torch.softmax(-(energy + vbias), 0), n, replacement=True, generator=g)
    w = reweight(vbias[idx], 1.0)
    est = float((w * f[idx]).sum())
    ess = 1.0 / float((w**2).sum())
    se = math.sqrt(truth * (1 - truth) / ess)
    assert abs(est - truth) < 3 * se
    df = delta_f_from_samples(s[idx], (-3, 0), (0, 3), weights=w)
    assert df == pytest.approx(-math.log(truth / (1 - truth)), abs=3 * se / (truth * (1 - truth)))


def test_torsion_distances_wrap_and_match_hand_values():
    """W2 on the torus takes the short way across +-pi; marginal KL of a reference in one bin against samples split
    over two bins is ln 2; identical weighted sets give 0."""
    ref, s = torch.tensor([[-3.0, 0.5]]), torch.tensor([[3.0, 0.5]])
    assert torsion_w2(ref, s) == pytest.approx(2 * math.pi - 6.0, abs=1e-9)
    ref = torch.tensor([[0.01, 1.0], [0.02, 1.0]])
    s = torch.tensor([[0.01, 1.0], [0.01 + 2 * math.pi / 36, 1.0], [0.03, 1.0]])
    kl = torsion_marginal_kl(ref, s, weights=torch.tensor([1.0, 2.0, 1.0]))
    assert float(kl[0]) == pytest.approx(math.log(2), abs=1e-4) and float(kl[1]) == pytest.approx(0.0, abs=1e-9)
    g = torch.Generator().manual_seed(0)
    x, w = torch.rand(50, 2, generator=g) * 6 - 3, torch.rand(50, generator=g)
    assert float(torsion_marginal_kl(x, x, ref_weights=w, weights=w).abs().max()) < 1e-12
    assert torsion_w2(x, x, ref_weights=w, weights=w) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="weights"):
        torsion_w2(x, x, weights=-w)


def test_units_hill_height_in_kjmol():
    assert pytest.approx(0.04824, abs=1e-5) == 0.0005 * EV_TO_KJMOL
    assert kT_kjmol(300.0) == pytest.approx(2.494, abs=1e-3)


# --- base process, bridge and corrector target --------------------------------------------------------


def test_edm_noise_cumulative_variance_closed_form():
    noise = EDMNoise(6.0, 1e-3, 3.0)
    t = torch.linspace(0, 1, 20001, dtype=torch.float64)
    g2 = noise.g(t) ** 2
    numeric = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumulative_trapezoid(g2, t)])
    torch.testing.assert_close(noise.variance(t), numeric, rtol=1e-6, atol=1e-6)
    assert noise.total == pytest.approx(float(numeric[-1]), rel=1e-6)


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


# --- toy energies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pot", [MuellerBrown(), FourWell(), EmbeddedToy(FourWell(), 3)], ids=str)
def test_toy_forces_are_minus_the_energy_gradient(pot):
    x = torch.randn(4, pot.dim, generator=torch.Generator().manual_seed(9), dtype=torch.float64) * 0.5
    out = pot.energy_and_forces(x)
    torch.testing.assert_close(out.forces, -_fd_grad(pot.energy, x), atol=1e-5, rtol=1e-5)
    assert pot.n_evals == 4


def test_embedding_leaves_the_pmf_unchanged_and_bad_input_raises():
    centres = torch.linspace(-2, 2, 41, dtype=torch.float64)
    emb = EmbeddedToy(FourWell(), 2)
    torch.testing.assert_close(
        pmf_quadrature(FourWell().energy, FourWell.box, centres),
        pmf_quadrature(
            lambda z: emb.energy(torch.cat([z, torch.zeros(len(z), 2, dtype=z.dtype)], 1)), FourWell.box, centres
        ),
    )
    with pytest.raises(ValueError, match="x"):
        FourWell().energy_and_forces(torch.tensor([[float("nan"), 0.0]]))
    with pytest.raises(ValueError, match="x"):
        FourWell().energy_and_forces(torch.zeros(3, 4))


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


# --- OpenMM ------------------------------------------------------------------------------------------------


@needs_aldp
@pytest.mark.parametrize(("solvent", "expected"), [(None, -88.089), ("OBC1", -138.970)])
def test_openmm_potential_reproduces_reference_energy_and_forces(solvent, expected):
    pot = OpenMMPotential(ALDP / "alanine-dipeptide-implicit.prmtop", solvent=solvent, workers=2)
    x = pot.positions(ALDP / "alanine-dipeptide-implicit.inpcrd")
    out = pot.energy_and_forces(x.repeat(2, 1))
    assert float(out.energy[0]) == pytest.approx(expected, abs=0.01)
    assert float(out.energy[1]) == pytest.approx(expected, abs=0.01)
    g = torch.Generator().manual_seed(11)
    d = torch.randn(1, pot.dim, generator=g, dtype=torch.float64)
    d = d / d.norm()
    h = 1e-5
    fd = (pot.energy_and_forces(x + h * d).energy - pot.energy_and_forces(x - h * d).energy) / (2 * h)
    assert float(-(out.forces[:1] * d).sum()) == pytest.approx(float(fd), rel=1e-3)


@needs_aldp
def test_shipped_structure_is_extended_and_torsions_match_numpy():
    pot = OpenMMPotential(ALDP / "alanine-dipeptide-implicit.prmtop")
    x = pot.positions(ALDP / "alanine-dipeptide-implicit.inpcrd")
    a = x.view(-1, 3).numpy()
    for idx in (PHI, PSI):
        ours = math.degrees(float(TorsionCV(idx)(x)))
        assert ours == pytest.approx(_numpy_dihedral(*a[list(idx)]), abs=0.01)
        assert abs(abs(ours) - 180.0) < 1.0  # extended structure


@needs_aldp
def test_openmm_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="prmtop"):
        OpenMMPotential(tmp_path / "missing.prmtop")
    bad = tmp_path / "bad.prmtop"
    bad.write_text("this is not a prmtop\n")
    with pytest.raises(ValueError, match="prmtop"):
        OpenMMPotential(bad)
    pot = OpenMMPotential(ALDP / "alanine-dipeptide-implicit.prmtop")
    with pytest.raises(ValueError, match="atoms"):
        pot.energy_and_forces(torch.zeros(2, 3 * 21, dtype=torch.float64))
    x = pot.positions(ALDP / "alanine-dipeptide-implicit.inpcrd").clone()
    x[0, 5] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        pot.energy_and_forces(x)
    with pytest.raises(FileNotFoundError, match="inpcrd"):
        pot.positions(tmp_path / "missing.inpcrd")
    wrong = tmp_path / "wrong.inpcrd"
    wrong.write_text("title\n    1\n   0.0000000   0.0000000   0.0000000\n")
    with pytest.raises(ValueError, match="inpcrd"):
        pot.positions(wrong)


# --- CLI ----------------------------------------------------------------------------------------------------


@needs_aldp
def test_cli_metad_then_evaluate(tmp_path):
    import json

    from typer.testing import CliRunner

    from flowlab.molecular.cli import app

    runner = CliRunner()
    run = tmp_path / "metad"
    res = runner.invoke(app, ["metad", "--steps", "1000", "--out", str(run), "--data-root", str(DATA)])
    assert res.exit_code == 0, res.output
    assert (run / "fes.pt").is_file() and (run / "config.json").is_file()
    res = runner.invoke(app, ["evaluate", str(run)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert report["energy_evals"] == 1000 and math.isfinite(report["dF_aR_kjmol"])
    res = runner.invoke(app, ["evaluate", str(tmp_path)])
    assert res.exit_code != 0 and "config.json" in res.output


# --- GFN2-xTB (tblite) and the SN2 system ----------------------------------------------------------------


def test_unit_constants_are_codata():
    from scipy import constants as c

    assert pytest.approx(c.physical_constants["Hartree energy"][0] * c.N_A / 1000, rel=1e-9) == HARTREE_TO_KJMOL
    assert pytest.approx(c.physical_constants["Bohr radius"][0] * 1e9, rel=1e-9) == BOHR_NM


def test_tblite_forces_are_minus_the_energy_gradient_and_match_tblite_in_its_units():
    pot = TBLitePotential(NUMBERS_SN2, charge=-1, workers=2)
    x = REACTANT + 0.003 * torch.randn(2, 18, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = pot.energy_and_forces(x)
    assert pot.n_evals == 2 and pot.n_failed == 0 and pot.n_retried == 0
    # central differences (eps = 1e-4 nm) on a few coordinates; forces are O(100) kJ/mol/nm here
    for j in (0, 4, 8, 13):
        e = torch.zeros_like(x)
        e[:, j] = 1e-4
        fd = (pot.energy_and_forces(x + e).energy - pot.energy_and_forces(x - e).energy) / 2e-4
        torch.testing.assert_close(out.forces[:, j], -fd, rtol=1e-3, atol=0.5)
    # the same structure in Bohr and Hartree straight from tblite (its gradient is dE/dx in Hartree/Bohr)
    from tblite.interface import Calculator

    calc = Calculator("GFN2-xTB", np.array(NUMBERS_SN2), REACTANT.reshape(6, 3).numpy() / 0.0529177210903, charge=-1)
    calc.set("verbosity", 0)
    res = calc.singlepoint()
    ours = pot.energy_and_forces(REACTANT)
    assert float(ours.energy[0]) == pytest.approx(res.get("energy") * 2625.499639, abs=1e-3)
    torch.testing.assert_close(
        ours.forces[0], torch.as_tensor(-res.get("gradient").ravel() * 2625.499639 / 0.0529177210903), atol=1e-2, rtol=0
    )


def test_sn2_reactant_is_relaxed_and_its_mirror_image_is_the_product():
    pot, cv = sn2_potential(workers=1), reaction_cv()
    out = pot.energy_and_forces(REACTANT)
    # relaxed: every force component is below 20 kJ/mol/nm, while moving one atom by 0.01 nm off the minimum
    # raises forces of ~1e3 kJ/mol/nm on the stiff C-H and C-Cl bonds
    assert float(out.forces.abs().max()) < 20.0
    kicked = REACTANT.clone()
    kicked[0, 9] += 0.01  # an H atom along x
    assert float(pot.energy_and_forces(kicked).forces.abs().max()) > 500.0
    both = torch.cat([REACTANT, mirror(REACTANT)])
    xi = cv(both).ravel()
    assert float(xi[0]) == pytest.approx(-0.1175, abs=1e-3) and float(xi[1]) == pytest.approx(-float(xi[0]), abs=1e-12)
    assert pot.energy_and_forces(both).energy[1].item() == pytest.approx(out.energy[0].item(), abs=1e-3)
    torch.testing.assert_close(mirror(mirror(both)), both)


class _Zero:
    """E = 0 for n atoms (to isolate the walls)."""

    kT, n_evals = 1.0, 0

    def __init__(self, n: int) -> None:
        self.dim = 3 * n

    def energy_and_forces(self, x):
        return EnergyForces(torch.zeros(len(x), dtype=x.dtype), torch.zeros_like(x))


def test_distance_walls_are_flat_inside_and_harmonic_outside():
    walls = DistanceWalls(_Zero(6), ((0, 2, 0.35),), k=1000.0)
    x = torch.zeros(3, 18, dtype=torch.float64)
    x[:, 6] = torch.tensor([0.30, 0.40, 0.50], dtype=torch.float64)  # atom 2 on the x axis
    out = walls.energy_and_forces(x)
    torch.testing.assert_close(
        out.energy, torch.tensor([0.0, 0.5 * 1000 * 0.05**2, 0.5 * 1000 * 0.15**2], dtype=torch.float64)
    )
    torch.testing.assert_close(out.forces[:, 6], torch.tensor([0.0, -1000 * 0.05, -1000 * 0.15], dtype=torch.float64))
    torch.testing.assert_close(out.forces[:, 0], -out.forces[:, 6])
    with pytest.raises(ValueError, match="walls"):
        DistanceWalls(_Zero(6), ((0, 6, 0.3),))


def test_langevin_steps_over_a_failed_energy_evaluation():
    class _Failing(FourWell):
        def energy_and_forces(self, x):
            out = super().energy_and_forces(x)
            return EnergyForces(out.energy, torch.full_like(out.forces, float("nan")))

    gen = torch.Generator().manual_seed(0)
    res = langevin(_Failing(), torch.zeros(4, 2), steps=10, dt=1e-3, generator=gen, record_every=5)
    assert res.samples.shape == (8, 2) and bool(torch.isfinite(res.samples).all())


def test_tblite_errors_are_clear():
    with pytest.raises(ValueError, match="numbers"):
        TBLitePotential([6, 0, 1])
    with pytest.raises(ValueError, match="method"):
        TBLitePotential([1, 1], method="GFN3")
    with pytest.raises(ValueError, match="uhf"):
        TBLitePotential(NUMBERS_SN2, charge=-1, uhf=1)  # 44 electrons cannot hold one unpaired electron
    with pytest.raises(ValueError, match="charge"):
        TBLitePotential(NUMBERS_SN2, charge=-0.5)
    pot = TBLitePotential(NUMBERS_SN2, charge=-1)
    with pytest.raises(ValueError, match="5 atoms given"):
        pot.energy_and_forces(torch.zeros(1, 15))
    bad = REACTANT.clone()
    bad[0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        pot.energy_and_forces(bad)


def _tiny_sn2_config():
    from flowlab.molecular.wt_asbs.benchmarks import SN2

    cfg = {**SN2.variants["quick"], "walkers": 2, "md_steps": 40, "n_eval": 16}
    cfg["asbs"] = {**cfg["asbs"], "stages": "AC", "adjoint_epochs": 2, "corrector_epochs": 1, "steps_per_epoch": 2,
                   "new_samples": 8, "skip_epochs": 0}  # fmt: skip
    return cfg


@needs_aldp
@pytest.mark.parametrize("seed", [0, 7])
def test_openmm_md_reproduces_with_the_same_seed(seed):
    """Seed 0 included: OpenMM reads a raw 0 as "choose a fresh seed", which made the reference rows irreproducible."""
    from flowlab.molecular.wt_asbs.reference import openmm_md

    prmtop, inpcrd = ALDP / "alanine-dipeptide-implicit.prmtop", ALDP / "alanine-dipeptide-implicit.inpcrd"
    runs = [openmm_md(prmtop, inpcrd, steps=200, solvent="OBC1", seed=seed, record_every=100) for _ in range(2)]
    assert np.array_equal(runs[0].cvs, runs[1].cvs)


@needs_aldp
def test_aldp_scenario_runs_end_to_end_on_a_tiny_budget(tmp_path):
    """The CPU sanity scenario on a tiny budget: every reported metric finite, the hill check exact, the torsion
    metrics and the FES plot present."""
    from flowlab.core.bench import BenchContext
    from flowlab.molecular.wt_asbs.benchmarks import ALDP

    cfg = {**ALDP.variants["quick"], "md_steps": 1000, "metad_frequency": 100, "n_eval": 32}
    cfg["asbs"] = {**cfg["asbs"], "stages": "AC", "adjoint_epochs": 2, "corrector_epochs": 1, "steps_per_epoch": 2,
                   "new_samples": 16, "skip_epochs": 0}  # fmt: skip
    ctx = BenchContext(0, "quick", cfg, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, DATA)
    res = ALDP.run(ctx)
    for row in (res.metrics, *res.baselines.values()):  # Delta F is NaN when C7eq is empty, as it is here
        assert all(math.isfinite(v) for k, v in row.items() if not k.startswith("dF_")), row
    assert res.metrics["hill_check_err"] < 1e-9
    assert {"KL_phi", "KL_psi", "W2_phi_psi"} <= set(res.metrics) & set(res.baselines["Langevin MD (OpenMM)"])
    assert all(p.is_file() for p in res.plots)


def test_sn2_scenario_runs_end_to_end_on_a_tiny_budget(tmp_path):
    from flowlab.core.bench import BenchContext
    from flowlab.molecular.wt_asbs.benchmarks import SN2

    ctx = BenchContext(
        0, "quick", _tiny_sn2_config(), torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, None
    )
    res = SN2.run(ctx)
    # energy calls: one per new sample of each adjoint epoch (2 x 8), one per Langevin walker step (2 x 40);
    # WT-ASBS deposits one hill per new sample of every epoch (3 x 8)
    assert res.metrics["evals"] == 2 * 8 and res.metrics["hills"] == 3 * 8
    assert res.baselines["WTMetaD (Langevin)"]["evals"] == 2 * 40
    assert set(res.baselines) == {"WTMetaD (Langevin)", "Langevin MD", "ASBS"}
    for row in (res.metrics, *res.baselines.values()):
        assert math.isfinite(row["dF_err"]) and math.isfinite(row["median_excess_energy_kT"]) and row["scf_failed"] == 0
    assert math.isfinite(res.baselines["WTMetaD (Langevin)"]["pmf_asymmetry"])


def test_cli_sample_then_evaluate_sn2(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from flowlab.molecular.cli import app
    from flowlab.molecular.wt_asbs.benchmarks import SN2

    monkeypatch.setitem(SN2.variants, "quick", _tiny_sn2_config())
    runner = CliRunner()
    run = tmp_path / "sn2"
    res = runner.invoke(app, ["sample", "--system", "sn2", "--n", "16", "--out", str(run)])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "config.json").read_text())["energy_evals"] == 2 * 8  # no path weights on molecules
    res = runner.invoke(app, ["evaluate", str(run)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert report["system"] == "sn2" and set(report["well_fractions"]) == {"reactant", "product"}


def test_cli_toy_sample_then_evaluate_with_each_weighting(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from flowlab.molecular.cli import app
    from flowlab.molecular.wt_asbs.benchmarks import TOY

    tiny = {"stages": "AC", "adjoint_epochs": 2, "corrector_epochs": 1, "steps_per_epoch": 2, "sde_steps": 10,
            "skip_epochs": 0, "new_samples": 32}  # fmt: skip
    monkeypatch.setitem(TOY.variants, "quick", {**TOY.variants["quick"], "asbs": tiny})
    runner = CliRunner()

    def evaluate(run, *extra):
        res = runner.invoke(app, ["evaluate", str(run), *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.output.strip().splitlines()[-1])

    for bias in ("on", "off"):
        run = tmp_path / bias
        res = runner.invoke(app, ["sample", "--system", "four-well", "--bias", bias, "--n", "64", "--out", str(run)])
        assert res.exit_code == 0, res.output
        assert torch.load(run / "samples.pt", weights_only=True)["log_w"].shape == (64,)
        report = evaluate(run)
        assert report["weights"] == "path" and 0 < report["ess_frac"] <= 1 and math.isfinite(report["dF_kT"])
        assert evaluate(run, "--weights", "none")["weights"] == "none"
    assert evaluate(tmp_path / "on", "--weights", "bias")["weights"] == "bias"
    res = runner.invoke(app, ["evaluate", str(tmp_path / "off"), "--weights", "bias"])
    assert res.exit_code != 0 and "WT-ASBS" in res.output
    res = runner.invoke(app, ["evaluate", str(tmp_path / "on"), "--weights", "exp"])
    assert res.exit_code != 0 and "--weights" in res.output
