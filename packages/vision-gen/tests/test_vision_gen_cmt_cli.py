"""`flowlab vision cmt mid-train|post-train|evaluate` on a tiny teacher, never mixing two runs in one folder (bad
inputs: test_vision_gen_cli_bad_inputs.py)."""

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
