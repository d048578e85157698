"""`flowlab trust train` does not resume (it writes its models at the end): an interrupted study run again in its
folder ends bit-identical to an uninterrupted one, and another study there is refused."""

from __future__ import annotations

from typer.testing import CliRunner

from flowlab.core.testing import assert_same_tensors, ctrl_c_at
from flowlab.trust_ood.certificate import evaluate
from flowlab.trust_ood.cli import app

runner = CliRunner()


def _run(*args: str, code: int = 0) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.output


def test_an_interrupted_study_run_again_ends_as_the_uninterrupted_one(tmp_path, monkeypatch, one_thread):
    """Ctrl-C once the ensemble is trained, in the score models' training, leaves no models; the same command in that
    folder trains every model from the start to the weights of an uninterrupted study."""
    args = ["train", "--pairs", "16", "--regressor-steps", "2", "--score-steps", "2", "--regressor", "cnn",
            "--ode-steps", "2"]  # fmt: skip
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, evaluate, "train_score_model", 1)
        _run(*args, "--out", str(tmp_path / "a"), code=130)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["run.json"]
    _run(*args, "--out", str(tmp_path / "a"))
    _run(*args, "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "*.pt")
    assert "another run" in _run(*args, "--seed", "1", "--out", str(tmp_path / "a"), code=2)
