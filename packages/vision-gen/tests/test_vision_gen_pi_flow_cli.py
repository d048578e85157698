"""`flowlab vision piflow distill|sample|evaluate` on a tiny teacher, and one clear error line (exit 2) per bad
input of each command."""

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
    same = run.invoke(vision, ["piflow", "distill", "--out", str(student), "--steps", "2", "--nfe", "1,2", *TINY])
    assert same.exit_code == 0, same.output  # the same options: resumes (already done)
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--method", "shortcut"], "method"),
        (["--nfe", "1,x"], "--nfe"),
        (["--nfe", "0"], "--nfe"),
        (["--steps", "0"], "--steps"),
        (["--device", "tpu"], "--device"),
        (["--size", "7"], "size"),
    ],
)
def test_distill_rejects_bad_input(tmp_path, args, message):
    res = CliRunner().invoke(vision, ["piflow", "distill", "--out", str(tmp_path / "s"), *TINY, *args])
    assert res.exit_code == 2 and message in res.output, res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nfe", "0"], "--nfe"),
        (["--n", "0"], "--n"),
        (["--device", "gpu0"], "--device"),
        (["--out", "grid.jpg"], "--out"),
        (["--temperature", "0"], "temperature"),
    ],
)
def test_sample_rejects_bad_input(student, tmp_path, args, message):
    base = ["piflow", "sample", "--student", str(student), "--out", str(tmp_path / "g.png")]
    res = CliRunner().invoke(vision, [*base, *args])
    assert res.exit_code == 2 and message in res.output, res.output


def test_sample_and_evaluate_reject_a_missing_or_corrupt_student(student, tmp_path):
    run = CliRunner()
    for command in ("sample", "evaluate"):
        extra = ["--out", str(tmp_path / "g.png")] if command == "sample" else []
        res = run.invoke(vision, ["piflow", command, "--student", str(tmp_path / "nowhere"), *extra])
        assert res.exit_code == 2 and "config.json" in res.output, res.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((student / "config.json").read_text())
    (broken / "student.safetensors").write_bytes(b"not a safetensors file")
    res = run.invoke(vision, ["piflow", "evaluate", "--student", str(broken)])
    assert res.exit_code == 2 and "weights" in res.output, res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--nfe", "2,-1"], "--nfe"), (["--n", "0"], "--n"), (["--teacher-steps", "0"], "--teacher-steps"),
     (["--device", "cuda:x"], "--device")],
)  # fmt: skip
def test_evaluate_rejects_bad_input(student, args, message):
    res = CliRunner().invoke(vision, ["piflow", "evaluate", "--student", str(student), *args])
    assert res.exit_code == 2 and message in res.output, res.output
