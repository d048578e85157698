"""`flowlab molecular sample` does not resume (it writes its sampler and samples at the end): an interrupted run
again in its folder ends bit-identical to an uninterrupted one, and so does a rerun over a finished run; another run
there is refused."""

from __future__ import annotations

import shutil
from dataclasses import replace

from typer.testing import CliRunner

from flowlab.core.testing import assert_same_tensors, ctrl_c_at
from flowlab.molecular.cli import app
from flowlab.molecular.wt_asbs.asbs import ASBS, ASBSConfig
from flowlab.molecular.wt_asbs.benchmarks.toy import TOY


def _run(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.output


def test_an_interrupted_toy_run_again_ends_as_the_uninterrupted_one(tmp_path, monkeypatch):
    """WT-ASBS on the four-well toy, an adjoint and a corrector epoch of two steps: Ctrl-C in the corrector epoch
    leaves nothing but run.json; the same command in that folder trains from the start to the sampler, bias grids
    and samples of an uninterrupted run, and so does a rerun over the finished run. Another seed is refused."""
    quick = TOY.variants["quick"]
    tiny = ASBSConfig(stages="AC", adjoint_epochs=1, corrector_epochs=1, steps_per_epoch=2, sde_steps=10,
                      skip_epochs=0, new_samples=32, batch_size=32, hidden=(16, 16))  # fmt: skip
    monkeypatch.setitem(TOY.variants, "quick", replace(quick, sampler=replace(quick.sampler, asbs=tiny)))
    args = ["sample", "--system", "four-well", "--n", "16"]
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, ASBS, "_loss", 3)
        _run(*args, "--out", str(tmp_path / "a"), code=130)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["run.json"]
    _run(*args, "--out", str(tmp_path / "a"))
    _run(*args, "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "*.pt")
    shutil.copytree(tmp_path / "a", tmp_path / "first")
    assert "pass --resume" in _run(*args, "--out", str(tmp_path / "a"), code=2)
    _run(*args, "--out", str(tmp_path / "a"), "--resume")
    assert_same_tensors(tmp_path / "a", tmp_path / "first", "*.pt")
    assert "another run" in _run(*args, "--seed", "1", "--out", str(tmp_path / "a"), code=2)
