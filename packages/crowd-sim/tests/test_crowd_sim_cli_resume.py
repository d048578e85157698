"""A resumed `flowlab crowd train --ckpt-dir` run ends bit-identical to the uninterrupted run with the same settings
and seed: interrupted in its teacher-forced epochs (resumed from the last epoch's end), then in its rollout
fine-tuning (run again from the finished teacher phase); a changed length is refused."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowlab.core.testing import assert_same_tensors, ctrl_c_at
from flowlab.crowd_sim.cli import app
from flowlab.crowd_sim.envsocial_diff import train

ROOT = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
pytestmark = pytest.mark.skipif(not (ROOT / "crowds").is_dir(), reason=f"crowds data set not found under {ROOT}")


@pytest.fixture(autouse=True)
def _tiny(monkeypatch, one_thread):
    """One thread, and rollouts of 2 frames, one graph a step and one DDIM step (no options set them)."""
    monkeypatch.setattr(
        train,
        "TrainConfig",
        functools.partial(train.TrainConfig, horizon=2, finetune_graphs=1, finetune_sample_steps=1),
    )


def _run(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.output


def test_a_run_interrupted_in_each_phase_resumes_bit_exactly(tmp_path, monkeypatch):
    """Two teacher epochs of two steps, then two rollout steps. Ctrl-C in the second epoch keeps the first epoch's
    checkpoint; the rerun resumes there (redrawing the epoch's frame order) and is stopped in the rollout phase; the
    third run loads the finished teacher phase and fine-tunes again from it, to the checkpoints and model of an
    uninterrupted run. More epochs or fine-tuning steps are another run, refused."""
    args = ["train", "--scene", "ucy_students03", "--ablation", "no_env", "--frame-stride", "20", "--epochs", "2",
            "--finetune-steps", "2"]  # fmt: skip
    a, b = [["--ckpt-dir", str(tmp_path / x), "--out", str(tmp_path / x / "model.pt")] for x in "ab"]
    for again, kept in (([], ["teacher/step-000000002"]),
                        (["--resume"], ["teacher/step-000000002", "teacher/step-000000004"])):  # fmt: skip
        with monkeypatch.context() as patch:
            ctrl_c_at(patch, train, "epsilon_loss", 4)  # the denoising loss of either phase
            _run(*args, *a, *again, code=130)
        assert sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a").glob("*/step-*")) == kept
    assert "pass --resume" in _run(*args, *a, code=2)
    _run(*args, *a, "--resume")
    _run(*args, *b)
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")
    for changed in (["--epochs", "3"], ["--finetune-steps", "3"]):
        assert "another run" in _run(*args, *changed, *a, code=2)
