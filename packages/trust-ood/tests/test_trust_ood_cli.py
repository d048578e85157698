"""`flowlab trust`: train (CNN backbone) -> certify -> evaluate through the package's command group on a tiny budget,
and clear errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from flowlab.trust_ood.certificate.evaluate import METHODS, OOD_FAMILIES, load_study
from flowlab.trust_ood.certificate.regressors import CNN1d
from flowlab.trust_ood.cli import app

runner = CliRunner()


def test_the_group_mounts_the_certificate_commands():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0 and all(name in res.output for name in ("train", "certify", "evaluate"))


def test_train_certify_evaluate_round_trip(tmp_path, one_thread):
    run = tmp_path / "run"
    res = runner.invoke(app, ["train", "--out", str(run), "--pairs", "64", "--regressor-steps", "3",
                              "--score-steps", "3", "--regressor", "cnn", "--ode-steps", "2"])  # fmt: skip
    assert res.exit_code == 0, res.output
    models = load_study(run)
    assert isinstance(models.regressor, CNN1d) and len(models.ensemble) == 5
    res = runner.invoke(app, ["certify", "--run", str(run), "--count", "3"])
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if line.startswith("param_shift[")]
    assert len(rows) == 3 and all(line.split()[-1] in ("ok", "OOD") for line in rows)
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--per-family", "4", "--latency-batch", "4",
                              "--out", str(tmp_path / "t.json")])  # fmt: skip
    assert res.exit_code == 0, res.output
    tables = json.loads((tmp_path / "t.json").read_text())["tables"]
    assert set(tables) == set(OOD_FAMILIES) and set(tables["param_shift"]) == set(METHODS)
    assert 0.0 <= tables["param_shift"]["joint"]["auroc"] <= 1.0
    assert "latency_batch4_s" in json.loads((tmp_path / "t.json").read_text())["latency"]
    (run / "regressor_0.pt").write_bytes(b"")  # an emptied weights file: one clean line, exit 2
    res = runner.invoke(app, ["certify", "--run", str(run), "--count", "3"])
    assert res.exit_code == 2 and "corrupt" in res.output, res.output


def test_bad_options_and_missing_runs_fail_clearly(tmp_path):
    res = runner.invoke(app, ["train", "--out", str(tmp_path), "--pde", "wave"])
    assert res.exit_code == 2 and "--pde" in res.output
    res = runner.invoke(app, ["train", "--out", str(tmp_path), "--regressor", "mlp"])
    assert res.exit_code == 2 and "regressor" in res.output
    res = runner.invoke(app, ["train", "--out", str(tmp_path), "--ode-steps", "0"])
    assert res.exit_code == 2 and "--ode-steps" in res.output
    res = runner.invoke(app, ["certify", "--run", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "config.json missing" in res.output
    res = runner.invoke(app, ["certify", "--run", str(tmp_path), "--variant", "y"])
    assert res.exit_code == 2 and "--variant" in res.output


def test_zero_pairs_and_zero_count_fail_before_any_work(tmp_path):
    res = runner.invoke(app, ["train", "--out", str(tmp_path / "r"), "--pairs", "0"])
    assert res.exit_code == 2 and "--pairs" in res.output, res.output
    res = runner.invoke(app, ["certify", "--run", str(tmp_path / "r"), "--count", "0"])
    assert res.exit_code == 2 and "--count" in res.output, res.output
