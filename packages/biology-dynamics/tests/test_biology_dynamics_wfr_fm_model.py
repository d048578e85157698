"""WFR-FM end to end on small problems: plans, a constant-growth toy, the AnnData API and its errors."""

from __future__ import annotations

import math

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import torch

from flowlab.biology_dynamics.wfr_fm.data import load_single_cell, read_time_series_csv, time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.evaluate import evaluate_time_points, w1, w1_split_floor
from flowlab.biology_dynamics.wfr_fm.generators import branching_toggle_switch, toggle_switch_growth
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import NeuralODEConfig
from flowlab.biology_dynamics.wfr_fm.objective import _PairDraw, unbalanced_plans
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFM, OTCFMConfig
from flowlab.biology_dynamics.wfr_fm.path import wfr_cost
from flowlab.biology_dynamics.wfr_fm.registry import load_model
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFMConfig
from flowlab.core.couplings import UnbalancedOTCoupling
from flowlab.datasets import root

DATA = root(required=False)
SMALL = {"v_hidden": (32, 32), "g_hidden": (32, 32), "batch": 64, "plan_iters": 200}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny MLPs run fastest on one thread (and far faster than two on a shared, loaded machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _doubling_grid() -> ad.AnnData:
    """25 sites 1 apart (beyond πδ for δ = 0.25, so no mass moves between sites); every site doubles per unit time."""
    sites = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0)), -1).reshape(-1, 2) - 2
    X = np.concatenate([np.repeat(sites, 2**k, axis=0) for k in range(3)]).astype(np.float32)
    t = np.concatenate([np.full(25 * 2**k, float(k)) for k in range(3)])
    adata = ad.AnnData(X=X, obs=pd.DataFrame({"day": t}, index=[f"c{i}" for i in range(len(t))]))
    adata.obsm["X_pca"] = X.copy()
    return adata


def test_semi_couplings_have_unit_marginals_and_keep_growth():
    g = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(30, 2, generator=g), torch.randn(50, 2, generator=g) * 0.8 + 0.3
    adata = ad.AnnData(X=np.concatenate([x0, x1]).astype(np.float32))
    adata.obs["time"] = [0.0] * 30 + [1.0] * 50
    plans = unbalanced_plans(time_series_from_adata(adata, use_rep="X"), delta=2.0, num_iter_max=300)
    gamma_0, gamma_1 = plans.plans[0].semi_couplings()
    torch.testing.assert_close(gamma_0.sum(1), torch.ones(30, dtype=torch.float64))
    torch.testing.assert_close(gamma_1.sum(0), torch.ones(50, dtype=torch.float64))
    assert plans.marginal_error[0] < 1e-9
    assert plans.static_cost[0] > 0


def test_the_sinkhorn_plan_solve_reaches_the_long_mm_optimum():
    """`solver="sinkhorn"` on 300 -> 420 cells at delta 3 (moves cost little against the marginal penalty):
    transport cost and mass within 1 % of 20,000 MM steps, where the reference's 1,000 steps are over 2 % off in
    cost, and the same semi-coupling marginals."""
    g = torch.Generator().manual_seed(1)
    x0, x1 = torch.randn(300, 3, generator=g), torch.randn(420, 3, generator=g) * 0.8 + 0.5
    adata = ad.AnnData(X=np.concatenate([x0, x1]).astype(np.float32))
    adata.obs["time"] = [0.0] * 300 + [1.0] * 420
    series = time_series_from_adata(adata, use_rep="X")
    exact = unbalanced_plans(series, delta=3.0, num_iter_max=20_000).plans[0].G
    short = unbalanced_plans(series, delta=3.0, num_iter_max=1000).plans[0].G
    fast = unbalanced_plans(series, delta=3.0, solver="sinkhorn")
    M = wfr_cost(3.0)(x0.double(), x1.double())
    ours = fast.plans[0].G
    assert float((ours * M).sum()) == pytest.approx(float((exact * M).sum()), rel=0.01)
    assert float((short * M).sum()) != pytest.approx(float((exact * M).sum()), rel=0.02)
    assert float(ours.sum()) == pytest.approx(float(exact.sum()), rel=0.01)
    assert fast.marginal_error[0] < 1e-9


def test_pair_draws_keep_only_the_plans_nonzero_entries_and_the_same_pairs():
    """A plan with exact zeros (a block-diagonal chunked solve): the sampler stores only its nonzero entries and
    draws, for one generator state, the very pairs and masses of an inverse CDF over every entry."""
    g = torch.Generator().manual_seed(2)
    x0, x1 = torch.randn(40, 2, generator=g, dtype=torch.float64), torch.randn(30, 2, generator=g, dtype=torch.float64)
    plan = UnbalancedOTCoupling(1.0, a=1.0, b=1.0, chunk=10).plan(x0, x1, generator=g)
    draw = _PairDraw(plan, "cpu")
    assert draw.m_0.numel() == int((plan.G > 0).sum()) < plan.G.numel() // 3
    i, j, m_0, m_1 = draw(500, torch.Generator().manual_seed(3))
    gamma_0, gamma_1 = plan.semi_couplings()
    cdf = torch.cumsum(gamma_0.reshape(-1), 0)
    u = torch.rand(500, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    flat = torch.searchsorted(cdf, u * cdf[-1], right=True)
    assert torch.equal(i * 30 + j, flat)
    assert torch.equal(m_0, gamma_0.reshape(-1)[flat]) and torch.equal(m_1, gamma_1.reshape(-1)[flat])


def test_constant_growth_without_movement_is_recovered():
    """Every site doubles per unit time. The WFR geodesic of pure growth has m(s) = ((1−s)√m0 + s√m1)², so g is
    not constant within an interval (it falls from 2(√2−1) to √2(√2−1) per unit time) but its time average over
    each interval is exactly ln 2: the recovered rate is checked as that average (2%), and no cell moves."""
    adata = _doubling_grid()
    model = WFRFlowMatching(delta=0.25, iters=300, lr=3e-3, ema=None, **SMALL)
    model.fit(adata, time_key="day", use_rep="X_pca", generator=torch.Generator().manual_seed(0))
    sites = adata.obsm["X_pca"][:25]
    for start in (0.0, 1.0):
        grid = start + (np.arange(20) + 0.5) / 20
        rate = np.mean([model.growth(sites, t).mean() for t in grid])
        assert abs(rate - math.log(2)) < 0.02 * math.log(2), (start, rate)
    assert max(np.abs(model.velocity(sites, t)).max() for t in (0.25, 1.0, 1.75)) < 0.05
    rows = evaluate_time_points(model, adata, time_key="day", use_rep="X_pca")
    assert [r.time for r in rows] == [1.0, 2.0]
    assert all(r.tmv < 0.02 for r in rows), [(r.mass_pred, r.mass_true) for r in rows]
    # a balanced model cannot grow: its mass error at t=2 is 3/4
    ot_cfm = OTCFM(iters=20, batch=32, v_hidden=(16,)).fit(
        adata, time_key="day", use_rep="X_pca", generator=torch.Generator().manual_seed(0)
    )
    assert evaluate_time_points(ot_cfm, adata, time_key="day", use_rep="X_pca")[-1].tmv == pytest.approx(0.75)


def test_fit_depends_on_its_generator_alone():
    """Two fits with equal generators give equal fields, whatever was drawn from torch's global RNG in between."""
    adata = _doubling_grid()
    fields = []
    for extra in (0, 1000):
        torch.rand(extra)
        model = WFRFlowMatching(delta=0.25, iters=5, **SMALL)
        model.fit(adata, time_key="day", use_rep="X_pca", generator=torch.Generator().manual_seed(3))
        fields.append(model.fields.state_dict())
    assert all(torch.equal(fields[0][k], fields[1][k]) for k in fields[0])


def test_csv_round_trip_fit_simulate_save_load(tmp_path):
    g = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "samples": np.repeat([0.0, 1.0, 2.0], [20, 30, 25]),
            "x1": np.concatenate([g.normal(0, 0.3, 20), g.normal(1, 0.3, 30), g.normal(2, 0.3, 25)]),
            "x2": g.normal(0, 0.3, 75),
        }
    )
    frame.to_csv(tmp_path / "course.csv", index=False)
    adata = read_time_series_csv(tmp_path / "course.csv")
    assert adata.obsm["X_emb"].shape == (75, 2) and adata.obs["time"].tolist() == frame["samples"].tolist()
    model = WFRFlowMatching(delta=2.0, iters=30, **SMALL).fit(adata, generator=torch.Generator().manual_seed(1))
    sim = model.simulate(adata)
    starts = adata.obs_names[adata.obs["time"] == 0.0]
    assert sorted(set(sim.obs["time"])) == [0.0, 1.0, 2.0]
    assert list(sim.obs["cell"][sim.obs["time"] == 0.0]) == list(starts)
    assert np.allclose(sim.obs["weight"][sim.obs["time"] == 0.0], 1.0)
    np.testing.assert_allclose(sim.obsm["X_emb"][:20], adata.obsm["X_emb"][:20], atol=1e-6)
    folder = model.save(tmp_path / "model")
    loaded = load_model(folder)
    assert isinstance(loaded, WFRFlowMatching) and loaded.state.times == (0.0, 1.0, 2.0)
    assert loaded.config == model.config  # the typed config survives the JSON round trip (tuples, None, floats)
    X = adata.obsm["X_emb"][:5]
    np.testing.assert_allclose(loaded.velocity(X, 0.5), model.velocity(X, 0.5), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loaded.growth(X, 1.5), model.growth(X, 1.5), rtol=1e-6, atol=1e-6)
    assert WFRFlowMatching.load(tmp_path / "model").config == model.config  # the parent folder works too
    with pytest.raises(ValueError, match="holds a 'wfr_fm' model, not a OTCFM"):
        OTCFM.load(folder)
    with pytest.raises(FileNotFoundError, match="path: no FlowLab checkpoint"):
        load_model(tmp_path / "nowhere")


def _course(n=(10, 12)) -> ad.AnnData:
    X = np.random.default_rng(0).normal(size=(sum(n), 3)).astype(np.float32)
    adata = ad.AnnData(X=X)
    adata.obs["time"] = np.repeat(np.arange(len(n), dtype=float), n)
    adata.obsm["X_emb"] = X.copy()
    return adata


def test_invalid_anndata_raises_clear_errors():
    model = WFRFlowMatching(delta=1.0, iters=2, **SMALL)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"time_key: 'day' not in adata\.obs"):
        model.fit(_course(), time_key="day", generator=gen)
    one = _course()
    one.obs["time"] = 0.0
    with pytest.raises(ValueError, match="at least 2"):
        model.fit(one, generator=gen)
    nan = _course()
    nan.obsm["X_emb"][3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(nan, generator=gen)
    with pytest.raises(ValueError, match=r"use_rep: 'X_pca' not in adata\.obsm"):
        model.fit(_course(), use_rep="X_pca", generator=gen)
    with pytest.raises(ValueError, match="hold_out"):
        model.fit(_course((5, 5, 5)), hold_out=2.0, generator=gen)
    with pytest.raises(ValueError, match="not fitted"):
        model.velocity(np.zeros((2, 3)), 0.5)
    model.fit(_course(), generator=gen)
    with pytest.raises(ValueError, match="dimension 3"):
        model.velocity(np.zeros((2, 4)), 0.5)
    with pytest.raises(ValueError, match="dimension 3"):
        model.simulate(np.zeros((2, 5)))
    wide = _course()
    wide.obsm["X_emb"] = np.zeros((wide.n_obs, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="does not match the model's 3"):
        model.fit(wide, generator=gen)
    with pytest.raises(ValueError, match="fitted range"):
        model.growth(np.zeros((2, 3)), 5.0)
    with pytest.raises(ValueError, match="delta"):
        WFRFlowMatching(delta=-1.0)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: WFRConfig(iters=0), "iters: expected a positive integer"),
        (lambda: WFRConfig(iters=10.0), r"WFRConfig\.iters: expected int"),
        (lambda: WFRConfig(v_hidden=[32, 32]), r"WFRConfig\.v_hidden: expected tuple"),
        (lambda: WFRConfig(ema=1.5), "ema: expected a decay"),
        (lambda: WFRConfig(sigma=-0.1), "sigma"),
        (lambda: OTCFMConfig(lr=0.0), "lr: expected a positive learning rate"),
        (lambda: UOTCFMConfig(delta=True), r"UOTCFMConfig\.delta: expected float"),
        (lambda: UOTCFMConfig(reg_m=0.0), "reg_m"),
        (lambda: WFRConfig(plan_solver="lbfgs"), "plan_solver: expected one of"),
        (lambda: UOTCFMConfig(plan_eps=0.0), "plan_eps: expected a positive"),
        (lambda: NeuralODEConfig(g_hidden=()), "g_hidden: expected a non-empty"),
        (lambda: NeuralODEConfig(step_size=-0.05), "step_size"),
        (lambda: NeuralODEConfig.from_mapping({"iter": 10}), r"unknown key\(s\) \['iter'\]"),
    ],
)
def test_configs_reject_bad_fields(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_config_keywords_and_instances_are_one_type():
    cfg = WFRConfig(delta=1.5, iters=7, v_hidden=(8,))
    assert WFRFlowMatching(cfg).config is cfg and WFRFlowMatching(delta=1.5, iters=7, v_hidden=(8,)).config == cfg
    assert WFRConfig.from_mapping(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="expected a WFRConfig, got OTCFMConfig"):
        WFRFlowMatching(OTCFMConfig())
    with pytest.raises(ValueError, match="not both"):
        WFRFlowMatching(cfg, iters=3)
    with pytest.raises(TypeError, match="itres"):
        WFRFlowMatching(itres=3)


def test_toggle_switch_growth_is_known_and_branch_specific():
    adata = branching_toggle_switch(300, times=(0.0, 1.0, 2.0, 3.0), generator=torch.Generator().manual_seed(0))
    assert set(adata.obs["time"]) == {0.0, 1.0, 2.0, 3.0}
    np.testing.assert_allclose(adata.obs["true_growth"], toggle_switch_growth(adata.X))
    hi, lo = toggle_switch_growth(np.array([[1.9, 0.1], [0.1, 1.9]]))
    assert hi > 0.75 and lo < 0.25  # the x1-high fate grows faster
    # the living population grows like exp(∫ mean g dt) (trapezoid over the sampled cells; 10% tolerance)
    alive = adata.obs.groupby("time")["n_alive"].first().to_numpy()
    mean_g = adata.obs.groupby("time")["true_growth"].mean().to_numpy()
    predicted = alive[0] * np.exp(np.concatenate([[0], np.cumsum((mean_g[1:] + mean_g[:-1]) / 2)]))
    np.testing.assert_allclose(alive, predicted, rtol=0.1)
    # cells branch: at the last time both fates are populated, and the fast one more so
    X = adata.X[adata.obs["time"] == 3.0]
    fast, slow = (X[:, 0] > X[:, 1] + 0.5).mean(), (X[:, 1] > X[:, 0] + 0.5).mean()
    assert fast > slow > 0.05


def test_w1_of_identical_and_shifted_clouds():
    x = np.random.default_rng(0).normal(size=(40, 3))
    assert w1(x, x) == pytest.approx(0.0, abs=1e-9)
    assert w1(x + np.array([0.5, 0.0, 0.0]), x) == pytest.approx(0.5, rel=1e-6)  # a translation costs its length
    assert w1(x, x, weights=np.full(40, 7.0)) == pytest.approx(0.0, abs=1e-9)  # weights are normalised


def test_split_floor_is_the_w1_of_two_independent_half_size_samples():
    # the halves of an iid sample are two independent samples of half the size, so the floor's mean over splits
    # equals the mean W1 of independent pairs of 100 Gaussian points (each a mean over 60 draws: the
    # difference has a std of about 2.2%, so 8% is 3.6 std)
    rng = np.random.default_rng(0)
    split = np.mean([w1_split_floor(rng.standard_normal((200, 2)), seed=s) for s in range(60)])
    pairs = np.mean([w1(rng.standard_normal((100, 2)), rng.standard_normal((100, 2))) for _ in range(60)])
    assert split == pytest.approx(pairs, rel=0.08)
    y = rng.standard_normal((50, 3))
    assert w1_split_floor(y, seed=1) == w1_split_floor(y, seed=1) > 0
    assert w1_split_floor(np.ones((50, 3))) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="at least 4 cells"):
        w1_split_floor(np.ones((3, 2)))


def test_loader_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"emt\.csv"):
        load_single_cell("emt", root=tmp_path)
    with pytest.raises(ValueError, match="name"):
        load_single_cell("nope", root=tmp_path)


@pytest.mark.skipif(
    DATA is None or not (DATA / "single_cell").is_dir(), reason=f"single_cell data set not found under {DATA}"
)
def test_shared_time_courses_load_with_their_counts():
    counts = {"emt": [577, 885, 788, 883], "simulation_gene_data": [400, 442, 530, 690, 969], "dygen": None}
    for name, expected in counts.items():
        adata = load_single_cell(name, root=DATA)
        series = time_series_from_adata(adata)
        if expected is not None:
            assert list(series.counts) == expected
        assert series.dim == {"emt": 10, "simulation_gene_data": 2, "dygen": 5}[name]
