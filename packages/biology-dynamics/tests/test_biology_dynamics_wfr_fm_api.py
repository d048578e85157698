"""The scanpy-style `fit` and the `flowlab cells` commands."""

from __future__ import annotations

import json

import anndata as ad
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

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
    assert [p.name for p in (tmp_path / "m").glob("step-*")] == ["step-000000010"]  # named for its 10 iterations
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
    png = tmp_path / "fit.png"
    args = ["evaluate", str(tmp_path / "m"), str(path), "--time-key", "day", "--use-rep", "X_pca"]
    res = runner.invoke(cells_app, [*args, "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {png}" in res.output
    bad = runner.invoke(cells_app, ["fit", str(path), "--time-key", "nope", "--iters", "2"])
    assert bad.exit_code == 2 and "time-key" in bad.output and "nope" in bad.output, bad.output
    bad = runner.invoke(cells_app, ["fit", str(path), "--time-key", "day", "--use-rep", "X_pca", "--iters", "0"])
    assert bad.exit_code == 2 and "iters: expected a positive integer" in bad.output
    bad = runner.invoke(cells_app, ["fit", str(path), "--method", "nope"])
    assert bad.exit_code == 2 and "--method" in bad.output
    bad = runner.invoke(cells_app, [*args[:3], "--time-key", "nope", "--use-rep", "X_pca"])  # caught: exit 2
    assert bad.exit_code == 2 and "nope" in bad.output and "Traceback" not in bad.output, bad.output
    weights = next((tmp_path / "m").rglob("weights.pt"))
    weights.write_bytes(b"")  # an emptied checkpoint: one clean line, exit 2
    bad = runner.invoke(cells_app, [*args[:3], "--time-key", "day", "--use-rep", "X_pca"])
    assert bad.exit_code == 2 and "corrupt" in bad.output, bad.output


def test_time_key_names_the_csv_time_column(tmp_path):
    """On a CSV --time-key names the time column (default `samples`); a missing one is refused, never ignored."""
    rows = ["day,x1,x2"] + [f"{d},{0.1 * i + d},{0.2 * i}" for d in (0, 1, 2) for i in range(12)]
    path = tmp_path / "course.csv"
    path.write_text("\n".join(rows) + "\n")
    runner = CliRunner()
    res = runner.invoke(cells_app, ["fit", str(path), "--time-key", "day", "--iters", "2", "--batch", "8",
                                    "--out", str(tmp_path / "m")])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(cells_app, ["evaluate", str(tmp_path / "m"), str(path), "--time-key", "day", "--json"])
    assert res.exit_code == 0 and [r["time"] for r in json.loads(res.output)] == [1.0, 2.0], res.output
    for command in (["fit", str(path)], ["evaluate", str(tmp_path / "m"), str(path)]):
        res = runner.invoke(cells_app, [*command, "--time-key", "foo"])
        assert res.exit_code == 2 and "time-key" in res.output and "foo" in res.output, res.output
    res = runner.invoke(cells_app, ["evaluate", str(tmp_path / "m"), str(path)])  # default: a `samples` column
    assert res.exit_code == 2 and "DATA" in res.output and "samples" in res.output, res.output


def test_fit_never_mixes_two_models_in_one_folder(tmp_path):
    """A refit with the same data and options rewrites its model; other options are refused (the folder untouched)
    unless --overwrite, which leaves one model."""
    path = tmp_path / "course.h5ad"
    _adata().write_h5ad(path)
    base = ["fit", str(path), "--time-key", "day", "--use-rep", "X_pca", "--batch", "16", "--out", str(tmp_path / "m")]
    runner = CliRunner()
    for again in ([], ["--resume"]):
        res = runner.invoke(cells_app, [*base, "--iters", "4", *again])
        assert res.exit_code == 0, res.output
    res = runner.invoke(cells_app, [*base, "--iters", "6"])
    assert res.exit_code == 2 and "another run" in res.output and "--overwrite" in res.output, res.output
    assert [p.name for p in (tmp_path / "m").glob("step-*")] == ["step-000000004"]
    res = runner.invoke(cells_app, [*base, "--iters", "6", "--overwrite"])
    assert res.exit_code == 0, res.output
    assert [p.name for p in (tmp_path / "m").glob("step-*")] == ["step-000000006"]


def test_cells_group_mounts_the_wfr_fm_commands():
    names = [c.name for c in cells_app.registered_commands]
    assert names == ["fit", "predict", "evaluate"]
    res = CliRunner().invoke(cells_app, ["--help"])
    assert res.exit_code == 0 and all(name in res.output for name in names)


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.csv", b""), ("header.csv", b"day,x1\n0,1.0\n"), ("text.csv", b"samples,x1\n0,abc\n1,def\n"),
     ("empty.h5ad", b"")],
)  # fmt: skip
def test_fit_refuses_unreadable_time_courses_in_one_line(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    res = CliRunner().invoke(cells_app, ["fit", str(path), "--iters", "2", "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "DATA" in res.output and "Traceback" not in res.output, res.output
