"""`flowlab manifold train` checkpoints only at its last step, so it does not resume a run cut short: an interrupted
run again in its folder trains from the start to the weights of an uninterrupted one, and a rerun with --resume over
a finished run loads its checkpoint and writes the same model. Its length is part of the run (the cosine decay spans
it), so more steps are refused, not grown."""

from __future__ import annotations

import shutil

from typer.testing import CliRunner

from flowlab.core.gfm import train as gfm_train
from flowlab.core.gfm.cli import app
from flowlab.core.testing import assert_same_tensors, ctrl_c_at

ARGS = ["train", "--data", "torus:2", "--objective", "psd", "--steps", "6", "--batch-size", "16", "--hidden", "8",
        "--no-progress"]  # fmt: skip


def _run(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.output


def test_an_interrupted_manifold_run_again_ends_as_the_uninterrupted_one(tmp_path, monkeypatch):
    """Ctrl-C at the fourth of six steps leaves no checkpoint; the same command in that folder trains from the start
    to an uninterrupted run's checkpoint and EMA model, and so does a rerun over the finished run. More steps or
    another seed are refused."""
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, gfm_train, "gfm_loss", 4)
        _run(*ARGS, "--out", str(tmp_path / "a"), code=130)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["run.json"]
    _run(*ARGS, "--out", str(tmp_path / "a"))
    _run(*ARGS, "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")
    shutil.copytree(tmp_path / "a", tmp_path / "first")
    assert "pass --resume" in _run(*ARGS, "--out", str(tmp_path / "a"), code=2)
    _run(*ARGS, "--out", str(tmp_path / "a"), "--resume")
    assert_same_tensors(tmp_path / "a", tmp_path / "first", "**/*.pt")
    for changed in (["--steps", "8"], ["--seed", "1"]):
        assert "another run" in _run(*ARGS, *changed, "--out", str(tmp_path / "a"), code=2)
