"""`flowlab crowd`: simulate / evaluate / render / export round trip on a real window, train on a tiny budget and
predict with the model, the text export read back by the package's reader, clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.crowd_sim.cli import app
from flowlab.crowd_sim.data import load_scene, read_pedestrian_txt

ROOT = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
needs_data = pytest.mark.skipif(not (ROOT / "crowds").is_dir(), reason=f"crowds data set not found under {ROOT}")
runner = CliRunner()


@pytest.fixture(scope="module")
def ucy_model(tmp_path_factory) -> Path:
    """A no-environment model of UCY students03 trained by `flowlab crowd train` on a tiny budget."""
    out = tmp_path_factory.mktemp("model") / "m.pt"
    res = runner.invoke(
        app,
        ["train", "--scene", "ucy_students03", "--ablation", "no_env", "--epochs", "1", "--frame-stride", "20",
         "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def _assert_reads_back(txt: Path, blob: dict, replica: int) -> None:
    """The text `export` wrote, read by `read_pedestrian_txt`, holds replica `replica` of the rollout `blob`: the
    recorded window's frame numbers, the recording's pedestrian ids, the coordinates exactly (float32 written with 9
    significant digits)."""
    window = load_scene(blob["scene"], ROOT, windows=[blob["window"]]).windows[blob["window"]]
    back = read_pedestrian_txt(txt, time_unit=window.time_unit)
    mask = blob["mask"]
    kept, frames = mask.any(0), mask.any(1).nonzero().squeeze(1)
    first, last = int(frames[0]), int(frames[-1])
    numbers = {int(line.split()[0]) for line in txt.read_text().splitlines()}
    assert sorted(numbers) == (blob["start"] + frames).tolist()
    assert torch.equal(back.mask, mask[first : last + 1, kept]) and torch.equal(back.ped_ids, window.ped_ids[kept])
    written = blob["positions"][replica, first : last + 1][:, kept]
    assert torch.equal(back.positions[back.mask], written[back.mask])


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
    res = runner.invoke(app, ["export", str(roll), "--out", str(tmp_path / "cv.txt")])
    assert res.exit_code == 0, res.output
    _assert_reads_back(tmp_path / "cv.txt", blob, 0)
    roll.write_bytes(roll.read_bytes()[:100])  # a truncated rollout: one clean line, exit 2
    res = runner.invoke(app, ["evaluate", str(roll)])
    assert res.exit_code == 2 and "corrupt" in res.output and "weights_only" not in res.output, res.output


@needs_data
def test_train_writes_a_loadable_model(ucy_model, tmp_path):
    res = runner.invoke(
        app, ["simulate", "--checkpoint", str(ucy_model), "--steps", "3", "--sampler", "ddim", "--sample-steps", "4",
              "--out", str(tmp_path / "r.pt")],
    )  # fmt: skip
    assert res.exit_code == 0, res.output


@needs_data
def test_predict_writes_a_rollout_that_evaluates_and_exports(ucy_model, tmp_path):
    """k futures of the pedestrians observed at frames 33..40 of the UCY test window, from their recorded positions;
    `evaluate` scores them where recorded, `export` writes one sample as text."""
    pred = tmp_path / "pred.pt"
    res = runner.invoke(
        app, ["predict", "--checkpoint", str(ucy_model), "--start", "40", "--horizon", "6", "--samples", "2",
              "--known-destinations", "--sampler", "ddim", "--sample-steps", "2", "--out", str(pred)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    blob = torch.load(pred, weights_only=True)
    window = load_scene("ucy_students03", ROOT, windows=["time162-216"]).windows["time162-216"]
    observed = window.mask[33:41].all(0)
    assert blob["positions"].shape == (2, 7, window.num_pedestrians, 2) and blob["start"] == 40
    assert blob["window"] == "time162-216" and torch.equal(blob["mask"], observed.expand(7, -1))
    assert torch.equal(blob["positions"][:, 0, observed], window.positions[40, observed].expand(2, -1, -1))
    assert not torch.equal(blob["positions"][0], blob["positions"][1])  # two samples
    res = runner.invoke(app, ["evaluate", str(pred), "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "m.json").read_text())["replicas"]
    assert len(rows) == 2 and all(0 < row["mae"] < 1 for row in rows), rows
    res = runner.invoke(app, ["export", str(pred), "--replica", "1", "--out", str(tmp_path / "pred.txt")])
    assert res.exit_code == 0, res.output
    _assert_reads_back(tmp_path / "pred.txt", blob, 1)


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
