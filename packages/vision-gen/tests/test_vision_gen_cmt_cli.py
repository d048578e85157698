"""`flowlab vision cmt mid-train|post-train|evaluate` on a tiny teacher, and one clear error line (exit 2) per bad
input of each command."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flowlab.vision_gen.cli import vision

TINY = ["--teacher-dim", "16", "--teacher-depth", "1", "--teacher-steps", "4"]


@pytest.fixture(scope="module")
def mid(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmt") / "mid"
    res = CliRunner().invoke(vision, ["cmt", "mid-train", "--out", str(out), "--steps", "2", "--batch-size", "16",
                                      "--nfe", "4", *TINY])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def test_mid_train_post_train_evaluate(mid, tmp_path):
    run = CliRunner()
    post = tmp_path / "post"
    res = run.invoke(vision, ["cmt", "post-train", "--out", str(post), "--init", str(mid), "--steps", "2",
                              "--batch-size", "8", "--eval-every", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    curve = json.loads((post / "curve.json").read_text())
    assert [row["step"] for row in curve] == [0, 1, 2] and all("fd_1step" in row for row in curve)
    assert json.loads((post / "config.json").read_text())["init"] == "cmt"
    png = tmp_path / "grid.png"
    res = run.invoke(vision, ["cmt", "evaluate", "--student", str(post), "--n", "40", "--grid", str(png)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    assert [r["steps"] for r in rows] == [1, 2] and all(r["init"] == "cmt" for r in rows)
    assert png.is_file()


def test_post_train_from_random_and_never_mixes_runs(tmp_path):
    run = CliRunner()
    out = tmp_path / "post"
    args = ["cmt", "post-train", "--out", str(out), "--init", "random", "--steps", "1", "--batch-size", "8", *TINY]
    assert run.invoke(vision, args).exit_code == 0
    other = run.invoke(vision, [*args, "--method", "ect_doubling"])
    assert other.exit_code == 2 and "another run" in other.output, other.output


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["mid-train", "--steps", "0"], "steps"),
        (["mid-train", "--batch-size", "20", "--nfe", "16"], "multiple"),
        (["mid-train", "--metric", "lpips"], "metric"),
        (["post-train", "--method", "meanflow_x"], "method"),
        (["post-train", "--init", "nosuchfolder"], "--student"),
        (["post-train", "--q", "1"], "q"),
        (["mid-train", "--teacher-dim", "0"], "--teacher-dim"),
        (["mid-train", "--solver", "euler"], "solver"),
        (["mid-train", "--branch", "flow"], "branch"),
        (["mid-train", "--device", "tpu"], "device"),
        (["post-train", "--batch-size", "0"], "batch_size"),
        (["post-train", "--lr", "-1"], "lr"),
        (["post-train", "--eval-every", "-1"], "eval_every"),
    ],
)
def test_bad_training_options_are_one_line(tmp_path, args, word):
    res = CliRunner().invoke(vision, ["cmt", args[0], "--out", str(tmp_path / "o"), *args[1:]])
    assert res.exit_code == 2 and word in res.output, res.output
    assert not (tmp_path / "o").exists()


def test_evaluate_refuses_bad_inputs(mid, tmp_path):
    run = CliRunner()
    res = run.invoke(vision, ["cmt", "evaluate", "--student", str(tmp_path)])
    assert res.exit_code == 2 and "CMT" in res.output and "config.json" in res.output, res.output
    res = run.invoke(vision, ["cmt", "evaluate", "--student", str(mid), "--grid", str(tmp_path / "g.jpg")])
    assert res.exit_code == 2 and ".png" in res.output
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "student.safetensors").write_bytes(b"garbage")
    res = run.invoke(vision, ["cmt", "evaluate", "--student", str(tmp_path)])
    assert res.exit_code == 2 and "config" in res.output


def test_meanflow_branch_end_to_end_and_kind_mismatch(mid, tmp_path):
    run = CliRunner()
    mf = tmp_path / "mf"
    res = run.invoke(vision, ["cmt", "mid-train", "--out", str(mf), "--branch", "meanflow", "--steps", "2",
                              "--batch-size", "16", "--nfe", "4", *TINY])  # fmt: skip
    assert res.exit_code == 0, res.output
    post = tmp_path / "mfpost"
    res = run.invoke(vision, ["cmt", "post-train", "--out", str(post), "--init", str(mf), "--method", "meanflow",
                              "--steps", "1", "--batch-size", "8"])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = run.invoke(vision, ["cmt", "evaluate", "--student", str(post), "--n", "20"])
    assert res.exit_code == 0 and '"steps": 2' in res.output, res.output
    wrong = run.invoke(vision, ["cmt", "post-train", "--out", str(tmp_path / "w"), "--init", str(mid), "--method",
                                "meanflow", "--steps", "1"])  # fmt: skip
    assert wrong.exit_code == 2 and "meanflow" in wrong.output, wrong.output


def test_evaluate_refuses_bad_numbers(mid):
    run = CliRunner()
    for args, word in ((["--n", "1"], "--n"), (["--device", "tpu"], "device")):
        res = run.invoke(vision, ["cmt", "evaluate", "--student", str(mid), *args])
        assert res.exit_code == 2 and word in res.output, res.output
