"""The scanpy-style `fit`, the `flowlab cells` commands and the registered scenarios."""

from __future__ import annotations

import json
import math

import anndata as ad
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowlab.biology_dynamics.benchmarks import SCENARIOS
from flowlab.biology_dynamics.cli import cells_app
from flowlab.biology_dynamics.wfr_fm import fit

SMALL = {"v_hidden": (16,), "g_hidden": (16,), "batch": 32, "plan_iters": 50, "iters": 20}


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _adata() -> ad.AnnData:
    rng = np.random.default_rng(0)
    n = [15, 25, 20]
    X = np.concatenate([rng.normal(k, 0.3, size=(m, 2)) for k, m in enumerate(n)]).astype(np.float32)
    adata = ad.AnnData(X=rng.normal(size=(sum(n), 6)).astype(np.float32))
    adata.obs["day"] = np.repeat([0.0, 2.0, 3.0], n)  # unequal spacing
    adata.obsm["X_pca"] = X
    return adata


def test_fit_writes_fields_back_into_the_anndata():
    adata = _adata()
    result = fit(adata, time_key="day", use_rep="X_pca", delta=2.0, **SMALL)
    assert result.adata is adata
    assert adata.obsm["velocity_wfr_fm"].shape == (adata.n_obs, 2)
    assert np.isfinite(adata.obs["growth_wfr_fm"]).all()
    assert adata.uns["wfr_fm"]["times"] == [0.0, 2.0, 3.0] and adata.uns["wfr_fm"]["params"]["delta"] == 2.0
    rows = adata.obs["day"] == 2.0
    np.testing.assert_allclose(
        adata.obs["growth_wfr_fm"][rows], result.model.growth(adata.obsm["X_pca"][rows], 2.0), rtol=1e-6
    )
    copy = fit(adata, time_key="day", use_rep="X_pca", key_added="other", copy=True, **SMALL)
    assert "growth_other" in copy.adata.obs and "growth_other" not in adata.obs


def test_cli_fit_predict_evaluate(tmp_path):
    adata = _adata()
    path = tmp_path / "course.h5ad"
    adata.write_h5ad(path)
    runner = CliRunner()
    args = ["fit", str(path), "--time-key", "day", "--use-rep", "X_pca", "--iters", "10", "--batch", "16"]
    res = runner.invoke(cells_app, [*args, "--out", str(tmp_path / "m"), "--write-h5ad", str(tmp_path / "a.h5ad")])
    assert res.exit_code == 0, res.output
    assert "growth_wfr_fm" in ad.read_h5ad(tmp_path / "a.h5ad").obs
    res = runner.invoke(
        cells_app,
        [
            "predict",
            str(tmp_path / "m"),
            str(path),
            "--time-key",
            "day",
            "--use-rep",
            "X_pca",
            "--out",
            str(tmp_path / "p.h5ad"),
        ],
    )
    assert res.exit_code == 0, res.output
    sim = ad.read_h5ad(tmp_path / "p.h5ad")
    assert sorted(set(sim.obs["time"])) == [0.0, 2.0, 3.0] and sim.n_obs == 3 * 15
    res = runner.invoke(
        cells_app,
        ["evaluate", str(tmp_path / "m"), str(path), "--time-key", "day", "--use-rep", "X_pca", "--json"],
    )
    assert res.exit_code == 0, res.output
    assert [row["time"] for row in json.loads(res.output)] == [2.0, 3.0]
    bad = runner.invoke(cells_app, ["fit", str(path), "--time-key", "nope", "--iters", "2"])
    assert bad.exit_code != 0 and "time_key" in bad.output


def test_scenarios_are_registered_with_both_variants():
    names = {s.name for s in SCENARIOS}
    assert {"bio.wfr_fm.gene", "bio.wfr_fm.emt", "bio.wfr_fm.dygen"} <= names
    for s in SCENARIOS:
        assert {"quick", "full"} <= set(s.variants)


def test_w1_curve_steps_resolve_early_crossings():
    from flowlab.biology_dynamics.wfr_fm.benchmarks import _curve_steps, _time_to

    steps = _curve_steps(500, 20)
    assert {1, 500} <= steps and set(range(25, 501, 25)) <= steps and max(steps) == 500
    assert len([s for s in steps if s < 25]) >= 5  # log-spaced points inside the first even interval
    points = [(0.5, 0.9), (1.0, 0.2), (2.0, 0.1)]
    assert _time_to(points, 0.2) == 1.0 and math.isnan(_time_to(points, 0.05))  # never reached
