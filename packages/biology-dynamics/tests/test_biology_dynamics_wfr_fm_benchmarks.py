"""The registered scenarios: typed variants shared with the models' configs, and the W1-curve helpers."""

from __future__ import annotations

import dataclasses
import math

import anndata as ad
import numpy as np
import pandas as pd
import pytest

from flowlab.biology_dynamics.benchmarks import SCENARIOS
from flowlab.biology_dynamics.wfr_fm.benchmarks.compare import models
from flowlab.biology_dynamics.wfr_fm.benchmarks.curves import curve_steps, time_to
from flowlab.biology_dynamics.wfr_fm.benchmarks.emt import EMTBench
from flowlab.biology_dynamics.wfr_fm.benchmarks.gene import GeneBench
from flowlab.biology_dynamics.wfr_fm.benchmarks.mixture import MixtureBench
from flowlab.biology_dynamics.wfr_fm.benchmarks.plan_scale import PlanScaleBench
from flowlab.biology_dynamics.wfr_fm.benchmarks.settings import WFRBench, quick, with_matching
from flowlab.biology_dynamics.wfr_fm.data import subsample_cells
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import GrowthNeuralODE


def test_scenarios_are_registered_with_typed_variants():
    by_name = {s.name: s for s in SCENARIOS if s.method == "wfr_fm"}
    assert set(by_name) == {
        "bio.wfr_fm.gene", "bio.wfr_fm.emt", "bio.wfr_fm.dygen", "bio.wfr_fm.mixture50", "bio.wfr_fm.plan_scale"
    }  # fmt: skip
    scale = by_name.pop("bio.wfr_fm.plan_scale").variants  # the plan solve alone at growing cell counts
    assert {type(v) for v in scale.values()} == {PlanScaleBench}
    assert max(scale["smoke"].cells) < max(scale["quick"].cells) < max(scale["full"].cells) == 20_000
    mixture = by_name.pop("bio.wfr_fm.mixture50").variants  # delta from the data; sizes from the presets
    assert {type(v) for v in mixture.values()} == {MixtureBench}
    assert mixture["smoke"].n0 < mixture["quick"].n0 < mixture["full"].n0 and mixture["quick"].dim == 50
    assert all(v.cell_fraction == 1 for v in mixture.values())  # a fresh draw, not a share of one
    kinds = {"bio.wfr_fm.gene": GeneBench, "bio.wfr_fm.emt": EMTBench, "bio.wfr_fm.dygen": WFRBench}
    for name, s in by_name.items():
        assert {type(v) for v in s.variants.values()} == {kinds[name]}
        q, f = s.variants["quick"], s.variants["full"]
        assert type(q).from_mapping(q.to_dict()) == q  # what results.jsonl records rebuilds the variant
        assert q.wfr.delta == q.uot_cfm.delta == f.wfr.delta == {"bio.wfr_fm.gene": 1.5}.get(name, 2.0)
        assert q.wfr.iters < f.wfr.iters and q.neural_ode.iters < f.neural_ode.iters
        smoke = s.variants["smoke"]
        assert type(smoke) is kinds[name] and smoke.wfr.delta == q.wfr.delta and smoke.wfr.iters < q.wfr.iters
        assert q.cell_fraction == f.cell_fraction == 1 and smoke.cell_fraction < 1  # quick and full keep every cell


def test_variants_hold_the_configs_the_cli_builds_models_from():
    cfg = SCENARIOS[0].variants["quick"]
    built = models(cfg)
    assert isinstance(built["WFR-FM"], WFRFlowMatching) and built["WFR-FM"].config is cfg.wfr
    assert isinstance(built["NeuralODE-growth"], GrowthNeuralODE)
    assert (cfg.neural_ode.solver, cfg.neural_ode.adjoint) == ("dopri5", True)
    assert (cfg.neural_ode_rk4.solver, cfg.neural_ode_rk4.adjoint) == ("rk4", False)
    # the matching methods share width, length and batch; OT-CFM has no plan, so no delta
    assert cfg.wfr.v_hidden == cfg.ot_cfm.v_hidden == cfg.uot_cfm.v_hidden == (128,) * 3
    assert cfg.wfr.batch == cfg.ot_cfm.batch == cfg.uot_cfm.batch == 128
    toggle = with_matching(cfg, delta=0.7)
    assert toggle.wfr.delta == toggle.uot_cfm.delta == 0.7 and toggle.ot_cfm == cfg.ot_cfm


def test_bench_settings_reject_misspelt_and_inconsistent_fields():
    with pytest.raises(TypeError, match="curve_pionts"):
        dataclasses.replace(WFRBench(), curve_pionts=3)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['itres'\]"):
        WFRBench.from_mapping({"wfr": {"itres": 3}})
    with pytest.raises(ValueError, match=r"uot_cfm\.delta: expected wfr\.delta"):
        WFRBench(wfr=WFRConfig(delta=1.0))
    with pytest.raises(ValueError, match="hold_out_methods"):
        EMTBench(hold_out_methods=("WFR-FM", "SDE"))
    assert quick(GeneBench()).toggle_n0 == GeneBench().toggle_n0  # quick() sizes the methods only


def test_w1_curve_steps_resolve_early_crossings():
    steps = curve_steps(500, 20)
    assert {1, 500} <= steps and set(range(25, 501, 25)) <= steps and max(steps) == 500
    assert len([s for s in steps if s < 25]) >= 5  # log-spaced points inside the first even interval
    points = [(0.5, 0.9), (1.0, 0.2), (2.0, 0.1)]
    assert time_to(points, 0.2) == 1.0 and math.isnan(time_to(points, 0.05))  # never reached


def test_subsample_cells_keeps_the_same_share_of_every_time_point():
    t = np.repeat([0.0, 1.0, 2.0], [40, 80, 20])
    obs = pd.DataFrame({"time": t}, index=[f"c{i}" for i in range(t.size)])
    adata = ad.AnnData(X=np.arange(t.size, dtype=np.float32)[:, None], obs=obs)
    assert subsample_cells(adata, 1.0) is adata
    small = subsample_cells(adata, 0.25, seed=3)
    assert np.unique(small.obs["time"], return_counts=True)[1].tolist() == [10, 20, 5]  # the counts keep the growth
    assert np.all(np.diff(small.X[:, 0]) > 0)  # file order kept
    assert np.array_equal(small.X, subsample_cells(adata, 0.25, seed=3).X)
    with pytest.raises(ValueError, match="fraction"):
        subsample_cells(adata, 0.0)
