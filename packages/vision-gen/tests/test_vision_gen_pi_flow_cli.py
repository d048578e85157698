"""`flowlab vision piflow distill|sample|evaluate` on a tiny teacher, resuming and never mixing two students in one
folder (bad inputs: test_vision_gen_cli_bad_inputs.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flowlab.vision_gen.cli import vision

TINY = ["--teacher-dim", "16", "--teacher-depth", "1", "--teacher-steps", "4"]


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("piflow") / "student"
    res = CliRunner().invoke(vision, ["piflow", "distill", "--out", str(out), "--steps", "2", "--nfe", "1,2", *TINY])
    assert res.exit_code == 0, res.output
    return out


def test_distill_never_mixes_two_students_in_one_folder(student):
    run = CliRunner()
    args = ["piflow", "distill", "--out", str(student), "--steps", "2", "--nfe", "1,2", *TINY]
    again = run.invoke(vision, args)
    assert again.exit_code == 2 and "--resume" in again.output and "--overwrite" in again.output, again.output
    same = run.invoke(vision, [*args, "--resume"])
    assert same.exit_code == 0, same.output  # the same options with --resume: continues (already done)
    both = run.invoke(vision, [*args, "--resume", "--overwrite"])
    assert both.exit_code == 2 and "not both" in both.output, both.output
    args = ["piflow", "distill", "--out", str(student), "--steps", "2", "--nfe", "1,2", "--method", "piflow_dx", *TINY]
    other = run.invoke(vision, args)
    assert other.exit_code == 2 and "another run" in other.output and "--overwrite" in other.output, other.output


def test_distill_sample_evaluate(student, tmp_path):
    run = CliRunner()
    png = tmp_path / "grid.png"
    res = run.invoke(vision, ["piflow", "sample", "--student", str(student), "--out", str(png), "--n", "20"])
    assert res.exit_code == 0, res.output
    assert png.is_file() and png.with_suffix(".pt").is_file()
    res = run.invoke(vision, ["piflow", "evaluate", "--student", str(student), "--nfe", "1", "--n", "40",
                              "--teacher-steps", "4"])  # fmt: skip
    assert res.exit_code == 0, res.output
    row = json.loads(res.output.strip().splitlines()[-1])
    assert row["method"] == "piflow_gm" and row["nfe"] == 1 and 0 <= row["recall"] <= 1
