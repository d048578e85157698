"""`flowlab crowd`: simulate / evaluate / render round trip on a real window, train on a tiny budget, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.crowd_sim.cli import app

ROOT = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
needs_data = pytest.mark.skipif(not (ROOT / "crowds").is_dir(), reason=f"crowds data set not found under {ROOT}")
runner = CliRunner()


@needs_data
def test_simulate_evaluate_render_round_trip(tmp_path):
    roll = tmp_path / "cv.pt"
    res = runner.invoke(app, ["simulate", "--scene", "gc", "--baseline", "cv", "--steps", "20", "--out", str(roll)])
    assert res.exit_code == 0, res.output
    blob = torch.load(roll, weights_only=True)
    assert blob["positions"].shape[:2] == (1, 21) and blob["window"] == "time2344-2404"
    res = runner.invoke(app, ["evaluate", str(roll), "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "m.json").read_text())["replicas"]
    assert set(rows[0]) == {"mae", "ot", "mmd", "dtw", "fde", "collisions"} and rows[0]["mae"] > 0
    res = runner.invoke(app, ["render", str(roll), "--out", str(tmp_path / "frames"), "--every", "10"])
    assert res.exit_code == 0, res.output
    assert len(list((tmp_path / "frames").glob("*.png"))) >= 2
    roll.write_bytes(roll.read_bytes()[:100])  # a truncated rollout: one clean line, exit 2
    res = runner.invoke(app, ["evaluate", str(roll)])
    assert res.exit_code == 2 and "corrupt" in res.output and "weights_only" not in res.output, res.output


@needs_data
def test_train_writes_a_loadable_model(tmp_path):
    out = tmp_path / "m.pt"
    res = runner.invoke(
        app,
        ["train", "--scene", "ucy_students03", "--ablation", "no_env", "--epochs", "1", "--frame-stride", "20",
         "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, ["simulate", "--checkpoint", str(out), "--steps", "3", "--sampler", "ddim", "--sample-steps", "4",
              "--out", str(tmp_path / "r.pt")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output


@needs_data
def test_train_checkpoints_belong_to_one_run(tmp_path):
    """--resume continues the run in --ckpt-dir, and another (here another ablation) is refused unless --overwrite."""
    base = ["train", "--scene", "ucy_students03", "--epochs", "1", "--frame-stride", "20", "--ckpt-dir",
            str(tmp_path / "ckpt"), "--out", str(tmp_path / "m.pt")]  # fmt: skip
    for again in ([], ["--resume"]):
        res = runner.invoke(app, [*base, "--ablation", "no_env", *again])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*base, "--ablation", "full"])
    assert res.exit_code == 2 and "another run" in res.output and "ablation" in res.output, res.output


def test_bad_invocations_name_the_problem(tmp_path):
    cases = [
        (["simulate", "--scene", "nowhere", "--baseline", "cv"], "unknown scene"),
        (["evaluate", str(tmp_path / "missing.pt")], "not found"),
        (["train", "--size", "huge"], "quick or full"),
        (["train", "--inits", "0"], "--inits >= 1"),
        (["train", "--inits", "2", "--ckpt-dir", str(tmp_path)], "1 with --ckpt-dir"),
    ]
    torch.save({"x": torch.zeros(1)}, tmp_path / "other.pt")
    cases.append((["render", str(tmp_path / "other.pt")], "not a rollout"))
    for args, message in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and message in " ".join(res.output.replace("│", " ").split()), res.output


@pytest.mark.parametrize(
    ("args", "option"),
    [(["simulate", "--scene", "gc", "--baseline", "cv", "--steps", "-5"], "--steps"),
     (["render", "nowhere.pt", "--every", "0"], "--every")],
)  # fmt: skip
def test_out_of_range_counts_fail_before_any_work(args, option):
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and option in res.output, res.output
