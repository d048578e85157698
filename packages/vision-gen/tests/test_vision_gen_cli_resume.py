"""A resumed `flowlab vision` training run ends bit-identical to the uninterrupted run with the same settings and
seed: piflow distill, sfbd run, cmt mid-train and post-train, sr train-teacher and distill, each interrupted (Ctrl-C
in its loss) and run again in its folder; a longer run there is another run, refused."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import assert_same_tensors, ctrl_c_at
from flowlab.vision_gen.cli import vision
from flowlab.vision_gen.cmt import train as cmt_train
from flowlab.vision_gen.gendr_pix import objective as sr_objective
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder
from flowlab.vision_gen.pi_flow import train as piflow_train
from flowlab.vision_gen.sfbd_omni import train as sfbd_train

TINY = ["--teacher-dim", "16", "--teacher-depth", "1", "--teacher-steps", "4"]
TINY_AE = AutoencoderConfig(size=32, in_channels=3, latent_channels=8, channels=(4, 8, 8), dataset="photos")


pytestmark = pytest.mark.usefixtures("one_thread")


def _run(*args: str, code: int = 0) -> str:
    """The command as in a fresh process: torch's global RNG (recorded in checkpoints) in its state at start-up."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        res = CliRunner().invoke(vision, list(args))
    assert res.exit_code == code, res.output
    return res.output


def _resumes(folder, monkeypatch, args: list[str], owner, name: str, call: int) -> None:
    """`args --out folder/a` stopped by Ctrl-C at the `call`-th call of `owner.name` and run again with --resume ends
    with the checkpoints and models of `args --out folder/b` run once (without --resume it is refused)."""
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, owner, name, call)
        _run(*args, "--out", str(folder / "a"), code=130)
    assert "pass --resume" in _run(*args, "--out", str(folder / "a"), code=2)
    _run(*args, "--out", str(folder / "a"), "--resume")
    _run(*args, "--out", str(folder / "b"))
    assert_same_tensors(folder / "a", folder / "b", "**/*.pt")
    assert_same_tensors(folder / "a", folder / "b", "*.safetensors")


@pytest.mark.parametrize(("method", "loss"), [("piflow_gm", "pi_id_loss"), ("piflow_dx", "pi_id_loss"),
                                               ("x0_regression", "x0_regression_loss"),
                                               ("dmd_lite", "dmd_lite_loss")])  # fmt: skip
def test_piflow_distill_resumes_bit_exactly(tmp_path, monkeypatch, method, loss):
    """Stopped at the third of four steps (a checkpoint each step), DMD-lite's fake score trained alongside."""
    args = ["piflow", "distill", "--method", method, "--steps", "4", "--nfe", "1,2", *TINY]
    _resumes(tmp_path, monkeypatch, args, piflow_train, loss, 3)
    assert "another run" in _run(*args, "--steps", "6", "--out", str(tmp_path / "a"), code=2)


def test_sfbd_run_resumes_bit_exactly(tmp_path, monkeypatch):
    """Stopped in its second round: the rerun takes up after the first (weights, Adam, EMA, generator, pools)."""
    args = ["sfbd", "run", "--clean", "20", "--rounds", "2", "--pretrain-steps", "2", "--steps", "2"]
    _resumes(tmp_path, monkeypatch, args, sfbd_train, "bridge_pair_loss", 5)
    assert "another run" in _run(*args, "--rounds", "3", "--out", str(tmp_path / "a"), code=2)


@pytest.mark.parametrize(("branch", "loss"), [("consistency", "cmt_loss"), ("meanflow", "cmt_meanflow_loss")])
def test_cmt_mid_train_resumes_bit_exactly(tmp_path, monkeypatch, branch, loss):
    """Stopped at the third of four steps, on either branch; its linear LR decay spans --steps, so more is refused."""
    args = ["cmt", "mid-train", "--branch", branch, "--steps", "4", "--batch-size", "8", "--nfe", "4", *TINY]
    _resumes(tmp_path, monkeypatch, args, cmt_train, loss, 3)
    assert "another run" in _run(*args, "--steps", "6", "--out", str(tmp_path / "a"), code=2)


@pytest.mark.parametrize(("method", "loss"), [("ect_doubling", "post_loss"), ("cd", "post_loss"),
                                               ("meanflow", "meanflow_post_loss")])  # fmt: skip
def test_cmt_post_train_resumes_bit_exactly_with_its_curve(tmp_path, monkeypatch, method, loss):
    """Stopped at the third of four steps, measured at every step: the resumed run takes up the curve's points up to
    its checkpoint (kept beside it) and writes the curve of the uninterrupted run."""
    args = ["cmt", "post-train", "--init", "random", "--method", method, "--steps", "4", "--batch-size", "8",
            "--eval-every", "1", *TINY]  # fmt: skip
    _resumes(tmp_path, monkeypatch, args, cmt_train, loss, 3)
    assert (tmp_path / "a" / "curve.json").read_text() == (tmp_path / "b" / "curve.json").read_text()
    assert "another run" in _run(*args, "--steps", "6", "--out", str(tmp_path / "a"), code=2)


def test_sr_train_teacher_and_distill_resume_bit_exactly(tmp_path, monkeypatch):
    """The teacher stopped at its third of four steps; the distillation stopped in stage I, and in stage II (stage I
    finished: loaded, not retrained), on a tiny untrained autoencoder in place of the kit's cached one."""
    torch.manual_seed(0)
    ae = TinyAutoencoder(TINY_AE).eval().requires_grad_(False)
    monkeypatch.setattr("flowlab.vision_gen.kit.autoencoder.tiny_autoencoder", lambda config, device=None: ae)
    args = ["sr", "train-teacher", "--steps", "4", "--pairs", "16", "--crop", "16"]
    _resumes(tmp_path, monkeypatch, args, sr_objective.TeacherObjective, "forward", 3)
    args = ["sr", "distill", "--teacher", str(tmp_path / "a"), "--stage1-steps", "4", "--stage2-steps", "4"]
    for stage in ("StageOneObjective", "StageTwoObjective"):
        _resumes(tmp_path / stage, monkeypatch, args, getattr(sr_objective, stage), "forward", 3)
    assert "another run" in _run(*args, "--stage2-steps", "6", "--out", str(tmp_path / "StageOneObjective" / "a"),
                                 code=2)  # fmt: skip
