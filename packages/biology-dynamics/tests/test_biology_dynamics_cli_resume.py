"""A resumed `flowlab dna train` run ends bit-identical to the uninterrupted run with the same settings and seed (in
every domain); `flowlab cells fit` does not resume (it writes its model at the end), so an interrupted fit run again
in its folder ends bit-identical to an uninterrupted one, and so does a rerun with --resume over a finished fit."""

from __future__ import annotations

import shutil
from typing import get_args

import anndata as ad
import numpy as np
import pytest
from typer.testing import CliRunner

from flowlab.biology_dynamics.cli import cells_app, dna_app
from flowlab.biology_dynamics.wfr_fm import objective
from flowlab.biology_dynamics.wright_fisher.run import Domain
from flowlab.core.testing import assert_same_tensors, ctrl_c_at

TOY = ["train", "--task", "toy-simplex", "--letters", "4", "--length", "2", "--width", "16", "--batch", "16"]


pytestmark = pytest.mark.usefixtures("one_thread")


def _run(app, *args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.output


@pytest.mark.parametrize("domain", get_args(Domain))
def test_dna_train_grown_to_more_steps_ends_as_the_uninterrupted_run(tmp_path, domain):
    """`dna train --steps 3`, then `--steps 5 --resume` into the same folder, equals `--steps 5` in another folder:
    weights, Adam state and RNG states (DDSM-lite's bank is a function of the run seed: a resumed run rebuilds it)."""
    args = [*TOY, "--domain", domain]
    _run(dna_app, *args, "--steps", "3", "--out", str(tmp_path / "a"))
    assert "pass --resume" in _run(dna_app, *args, "--steps", "5", "--out", str(tmp_path / "a"), code=2)
    _run(dna_app, *args, "--steps", "5", "--out", str(tmp_path / "a"), "--resume")
    _run(dna_app, *args, "--steps", "5", "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "step-000000005/weights.pt")


def test_motif_run_resumes_bit_exactly(tmp_path):
    """The class-conditional motif task resumes as exactly as the toy tasks."""
    args = ["train", "--length", "40", "--width", "16", "--batch", "8"]
    _run(dna_app, *args, "--steps", "2", "--out", str(tmp_path / "a"))
    _run(dna_app, *args, "--steps", "4", "--out", str(tmp_path / "a"), "--resume")
    _run(dna_app, *args, "--steps", "4", "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "step-000000004/weights.pt")


def test_an_interrupted_cells_fit_run_again_ends_as_the_uninterrupted_one(tmp_path, monkeypatch):
    """Ctrl-C at the fifth of ten training steps leaves no model; the same command in that folder trains from the
    start to the weights of an uninterrupted fit, and so does a rerun with --resume over the finished fit. Other
    options are refused."""
    rng = np.random.default_rng(0)
    n = [15, 25, 20]
    adata = ad.AnnData(X=rng.normal(size=(sum(n), 2)).astype(np.float32))
    adata.obs["day"] = np.repeat([0.0, 2.0, 3.0], n)
    adata.obsm["X_pca"] = np.concatenate([rng.normal(k, 0.3, size=(m, 2)) for k, m in enumerate(n)]).astype(np.float32)
    adata.write_h5ad(tmp_path / "course.h5ad")
    args = ["fit", str(tmp_path / "course.h5ad"), "--time-key", "day", "--use-rep", "X_pca", "--iters", "10",
            "--batch", "16"]  # fmt: skip
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, objective, "matching_loss", 5)
        _run(cells_app, *args, "--out", str(tmp_path / "a"), code=130)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["run.json"]
    _run(cells_app, *args, "--out", str(tmp_path / "a"))  # only run.json there: a fresh run
    _run(cells_app, *args, "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "step-*/weights.pt")
    shutil.copytree(tmp_path / "a", tmp_path / "first")
    assert "pass --resume" in _run(cells_app, *args, "--out", str(tmp_path / "a"), code=2)
    _run(cells_app, *args, "--out", str(tmp_path / "a"), "--resume")
    assert_same_tensors(tmp_path / "a", tmp_path / "first", "step-*/weights.pt")
    assert "another run" in _run(cells_app, *args, "--seed", "1", "--out", str(tmp_path / "a"), code=2)
