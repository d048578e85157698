"""The certificate scenarios: typed variants (one `StudyConfig` shared with the CLI) and a tiny end-to-end run."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from flowlab.core.bench import BenchContext
from flowlab.trust_ood.benchmarks import SCENARIOS
from flowlab.trust_ood.certificate.evaluate import METHODS, OOD_FAMILIES, StudyConfig


def test_variants_are_study_configs_and_reject_bad_fields():
    assert [s.name for s in SCENARIOS] == ["trust.certificate.heat", "trust.certificate.burgers"]
    for s in SCENARIOS:
        quick, full = s.variants["quick"], s.variants["full"]
        assert isinstance(quick, StudyConfig) and quick.pde == full.pde == s.name.split(".")[-1]
        assert StudyConfig.from_mapping(quick.to_dict()) == quick
    quick = SCENARIOS[0].variants["quick"]
    with pytest.raises(TypeError, match="score_stepz"):
        replace(quick, score_stepz=10)
    with pytest.raises(ValueError, match=r"unknown key.*score_stepz"):
        StudyConfig.from_mapping({"score_stepz": 10})
    with pytest.raises(ValueError, match="pde"):
        replace(quick, pde="wave")
    with pytest.raises(ValueError, match="train_pairs"):
        replace(quick, train_pairs=2000.0)  # a count, not a float
    with pytest.raises(ValueError, match="ode_steps"):
        replace(quick, ode_steps=0)
    with pytest.raises(ValueError, match="ode_spacing"):
        replace(quick, ode_spacing="linear")


def test_heat_scenario_runs_end_to_end_and_draws_its_plot(tmp_path, one_thread):
    scenario = SCENARIOS[0]
    tiny = replace(
        scenario.variants["quick"],
        train_pairs=64,
        regressor_steps=3,
        score_steps=3,
        ensemble_size=2,
        calib=4,
        test_per_family=4,
        ode_steps=2,
        mc_passes=2,
    )
    ctx = BenchContext(3, "quick", tiny, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, None)
    res = scenario.run(ctx)
    assert all(0.0 <= res.metrics[f"{fam}.auroc"] <= 1.0 for fam in OOD_FAMILIES)
    assert len(res.baselines) == len(METHODS) - 1
    assert all(math.isfinite(v) for b in res.baselines.values() for k, v in b.items() if k.endswith("auroc"))
    assert res.nfe == {"certificate_solve": 4 * 2}
    (plot,) = res.plots
    assert plot.name == "trust.certificate.heat_auroc.png" and plot.stat().st_size > 0
