"""The WT-ASBS scenarios end to end on tiny budgets, and their typed variants."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from flowlab.core.bench import BenchContext
from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP, ALDP_QUICK
from flowlab.molecular.wt_asbs.benchmarks.sn2 import SN2, SN2Bench
from flowlab.molecular.wt_asbs.benchmarks.toy import TOY_FULL, TOY_QUICK, ToyBench


def test_aldp_scenario_runs_end_to_end_on_a_tiny_budget(tmp_path, aldp_root):
    """The CPU sanity scenario on a tiny budget: every reported metric finite, the hill check exact, the torsion
    metrics and the FES plot present."""
    asbs = replace(
        ALDP_QUICK.sampler.asbs,
        stages="AC",
        adjoint_epochs=2,
        corrector_epochs=1,
        steps_per_epoch=2,
        new_samples=16,
        skip_epochs=0,
    )
    cfg = replace(
        ALDP_QUICK, sampler=replace(ALDP_QUICK.sampler, asbs=asbs), md_steps=1000, metad_frequency=100, n_eval=32
    )
    ctx = BenchContext(0, "quick", cfg, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, aldp_root)
    res = ALDP.run(ctx)
    for row in (res.metrics, *res.baselines.values()):  # Delta F is NaN when C7eq is empty, as it is here
        assert all(math.isfinite(v) for k, v in row.items() if not k.startswith("dF_")), row
    assert res.metrics["hill_check_err"] < 1e-9
    assert {"KL_phi", "KL_psi", "W2_phi_psi"} <= set(res.metrics) & set(res.baselines["Langevin MD (OpenMM)"])
    assert all(p.is_file() for p in res.plots)


def test_sn2_scenario_runs_end_to_end_on_a_tiny_budget(tmp_path, tiny_sn2):
    ctx = BenchContext(0, "quick", tiny_sn2, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, None)
    res = SN2.run(ctx)
    # energy calls: one per new sample of each adjoint epoch (2 x 8), one per Langevin walker step (2 x 40);
    # WT-ASBS deposits one hill per new sample of every epoch (3 x 8)
    assert res.metrics["evals"] == 2 * 8 and res.metrics["hills"] == 3 * 8
    assert res.baselines["WTMetaD (Langevin)"]["evals"] == 2 * 40
    assert set(res.baselines) == {"WTMetaD (Langevin)", "Langevin MD", "ASBS"}
    for row in (res.metrics, *res.baselines.values()):
        assert math.isfinite(row["dF_err"]) and math.isfinite(row["median_excess_energy_kT"]) and row["scf_failed"] == 0
    assert math.isfinite(res.baselines["WTMetaD (Langevin)"]["pmf_asymmetry"])


def test_sn2_cpu_samplers_are_warm_started_from_the_plain_md_and_pay_for_it(tmp_path):
    """The cpu variant's code path at smoke size: both samplers bridge-match onto the plain Langevin samples before
    their curriculum; the MD's energy calls and seconds are added to each sampler's and reported as
    warm_start_evals and warm_start_wall_s."""
    smoke = SN2.variants["smoke"]
    assert smoke.sampler.asbs.warm_start_steps > 0 and SN2.variants["cpu"].sampler.asbs.warm_start_steps > 0
    ctx = BenchContext(0, "smoke", smoke, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, None)
    res = SN2.run(ctx)
    md = res.baselines["Langevin MD"]["evals"]
    assert md == smoke.walkers * smoke.md_steps
    adjoint = smoke.sampler.asbs.stages.count("A") * smoke.sampler.asbs.adjoint_epochs * smoke.sampler.asbs.new_samples
    for row in (res.metrics, res.baselines["ASBS"]):  # + 24: the internal coordinates' Hessian at the reactant
        assert row["warm_start_evals"] == md and row["evals"] == md + adjoint + 24
        assert row["warm_start_wall_s"] == res.baselines["Langevin MD"]["wall_s"] < row["wall_s"]


def test_variants_are_typed_and_reject_misspelt_or_unknown_settings():
    """A misspelt field, a wrong type, an unknown key in a TOML-style table or a curriculum for a system that does
    not exist is an error naming it; Mueller-Brown's quick curriculum is the full one."""
    with pytest.raises(TypeError, match="md_step"):
        replace(TOY_QUICK, md_step=100)
    with pytest.raises(ValueError, match="walkers"):
        replace(TOY_QUICK, walkers=2.5)
    with pytest.raises(ValueError, match="systems"):
        replace(TOY_QUICK, systems=("four-wel",))
    with pytest.raises(ValueError, match="asbs_by_system"):
        replace(TOY_QUICK, asbs_by_system={"muller-brown": TOY_FULL.sampler.asbs})
    table = {**SN2.variants["quick"].to_dict(), "pmf_cutof": 20.0}
    with pytest.raises(ValueError, match="pmf_cutof"):
        SN2Bench.from_mapping(table)
    del table["pmf_cutof"]
    assert SN2Bench.from_mapping(table) == SN2.variants["quick"]
    assert isinstance(TOY_QUICK, ToyBench)
    assert TOY_QUICK.sampler_for("mueller-brown").asbs == TOY_FULL.sampler.asbs
    assert TOY_QUICK.sampler_for("four-well").asbs != TOY_FULL.sampler.asbs


def test_torsion_scores_take_every_sample_for_the_kl_and_a_subsample_for_w2():
    """A rare basin lives in a few reweighted samples: the KL must see all of them, while the exact W2 plan runs on
    at most max_points evenly spaced ones (the weights subsampled with them)."""
    from flowlab.molecular.wt_asbs.analysis import torsion_marginal_kl, torsion_w2
    from flowlab.molecular.wt_asbs.benchmarks.aldp_scores import _fes_points, torsion_scores

    gen = torch.Generator().manual_seed(0)
    grid = torch.linspace(-math.pi, math.pi, 31, dtype=torch.float64)
    fes = (1 - torch.cos(grid[:, None])) * 4 + (1 - torch.cos(grid[None, :] - 1)) * 2  # (psi, phi), kJ/mol
    s = (torch.rand(60, 2, generator=gen, dtype=torch.float64) - 0.5) * 2 * math.pi
    w = torch.rand(60, generator=gen, dtype=torch.float64)
    got = torsion_scores(fes.numpy(), 2.494, s.numpy(), w.numpy(), max_points=7)
    ref, ref_w = _fes_points(fes.numpy(), 2.494, stride=1)
    kl_all = torsion_marginal_kl(ref, s, ref_weights=ref_w, weights=w)
    kl_sub = torsion_marginal_kl(ref, s[::10], ref_weights=ref_w, weights=w[::10])
    assert got["KL_phi"] == pytest.approx(float(kl_all[0]), rel=1e-12)
    assert got["KL_psi"] == pytest.approx(float(kl_all[1]), rel=1e-12)
    assert abs(got["KL_phi"] - float(kl_sub[0])) > 1e-3  # the subsample would have given another number
    keep = torch.linspace(0, 59, 7).long()
    ref3, ref3_w = _fes_points(fes.numpy(), 2.494, stride=3)
    assert got["W2_phi_psi"] == pytest.approx(torsion_w2(ref3, s[keep], ref_weights=ref3_w, weights=w[keep]))
