"""`flowlab vision scene3d pretrain|distill|sample|evaluate` end to end at toy size (pretrain -> distill -> sample ->
evaluate), pre-training and distillation resumed bit-exactly, and every kind of bad input (`flowlab.core.testing`)
ending in one error naming the option or file (exit 2) before any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, assert_same_tensors, bad_files, check_bad_inputs, uncovered_commands
from flowlab.vision_gen.cli import vision
from flowlab.vision_gen.flashworld.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--n-train", "16", "--dim", "16", "--depth", "1", "--heads", "2", "--batch-size", "4"]
KINDS = {
    "pretrain": ["range", "type", "nan", "choice", "mixing"],
    "distill": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range", "type",
                "nan", "choice", "mixing"],
    "sample": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range", "type",
               "choice"],
    "evaluate": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range", "type",
                 "choice"],
}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWLAB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def _run(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(vision, ["scene3d", *args])
    assert res.exit_code == code, res.output
    return res.output


def _json(output: str) -> dict:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("scene3d")
    _run("pretrain", "--out", str(root / "teacher"), "--steps", "3", *TINY)
    _run("distill", "--teacher", str(root / "teacher"), "--out", str(root / "student"), "--steps", "2", "--nfe", "2",
         "--batch-size", "2")  # fmt: skip
    return root / "teacher", root / "student"


def test_pretrain_distill_sample_evaluate(trained, tmp_path):
    teacher, student = trained
    meta = json.loads((student / "config.json").read_text())
    assert meta["kind"] == "distilled" and meta["distill"]["nfe"] == 2 and meta["scenes"]["n_train"] == 16
    for mode in ("3d", "mv"):
        png = tmp_path / f"{mode}.png"
        row = _json(_run("sample", "--checkpoint", str(student), "--out", str(png), "--mode", mode, "--nfe", "2",
                         "--n", "3"))  # fmt: skip
        assert row["mode"] == mode and png.read_bytes()[:4] == b"\x89PNG"
    row = _json(_run("evaluate", "--checkpoint", str(teacher), "--mode", "mv", "--nfe", "2", "--n", "4",
                     "--fit-steps", "3"))  # fmt: skip
    assert {"consistency", "sharpness", "fd", "psnr_novel", "seconds"} <= set(row) and row["nfe"] == 2
    assert all(isinstance(row[k], float) for k in ("consistency", "sharpness", "psnr_novel"))


def _cut_to_first_checkpoint(run: Path) -> None:
    """Keep only the first checkpoint (step 1 of 4) and the run's claim: an interrupted run."""
    for extra in sorted((run / "ckpt").iterdir())[1:]:
        shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    (run / "model.safetensors").unlink()


def test_pretrain_resumes_bit_exactly(tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    _run("pretrain", "--out", str(whole), "--steps", "4", *TINY)
    _run("pretrain", "--out", str(cut), "--steps", "4", *TINY)
    _cut_to_first_checkpoint(cut)
    _run("pretrain", "--out", str(cut), "--steps", "4", *TINY, "--resume")
    assert_same_tensors(whole, cut, "model.safetensors")


def test_distill_resumes_bit_exactly(trained, tmp_path):
    args = ["--teacher", str(trained[0]), "--steps", "4", "--nfe", "2", "--batch-size", "2"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    _run("distill", "--out", str(whole), *args)
    _run("distill", "--out", str(cut), *args)
    _cut_to_first_checkpoint(cut)
    _run("distill", "--out", str(cut), *args, "--resume")
    assert_same_tensors(whole, cut, "model.safetensors")


def _cases(teacher: Path, student: Path, bad: Path) -> list[BadInput]:
    files = bad_files(bad / "files", ".safetensors", like=teacher / "model.safetensors")

    def folder(name: str, weights: Path | None = None, config: str | None = None) -> Path:
        out = bad / name
        out.mkdir(parents=True, exist_ok=True)
        cfg = (teacher / "config.json").read_text() if config is None else config
        (out / "config.json").write_text(cfg)
        if weights is not None and weights.exists():
            shutil.copy(weights, out / "model.safetensors")
        return out

    state = load_file(teacher / "model.safetensors")
    save_file({k: torch.zeros(*v.shape[:-1], v.shape[-1] + 1) if v.dim() else v for k, v in state.items()},
              bad / "wide.safetensors")  # fmt: skip
    folders = {
        "missing_file": bad / "nothing",
        "empty_file": folder("empty", files["empty"]),
        "corrupt_file": folder("corrupt", files["truncated"]),
        "pickle": folder("pickle", files["pickle"]),
        "wrong_content": folder("other", teacher / "model.safetensors", json.dumps({"format": "other", "version": 1})),
        "shape": folder("wide", bad / "wide.safetensors"),
    }
    nan_state = {k: v.clone().fill_(float("nan")) if v.is_floating_point() else v for k, v in state.items()}
    save_file(nan_state, bad / "nan.safetensors")
    folders["nan"] = folder("nan", bad / "nan.safetensors")
    out = str(bad / "run")
    png = str(bad / "s.png")
    cases = [
        BadInput("range", ["pretrain", "--out", out, "--size", "12"], ["--size"]),
        BadInput("range", ["pretrain", "--out", out, "--steps", "0", *TINY], ["--steps"]),
        BadInput("range", ["pretrain", "--out", out, "--n-gaussians", "0"], ["--n-gaussians"]),
        BadInput("range", ["pretrain", "--out", out, "--dim", "18", "--heads", "4"], ["--dim"]),
        BadInput("type", ["pretrain", "--out", out, "--steps", "many"], ["--steps"]),
        BadInput("nan", ["pretrain", "--out", out, "--lr", "nan"], ["--lr"]),
        BadInput("choice", ["pretrain", "--out", out, "--device", "gpu"], ["--device"]),
        BadInput("mixing", ["pretrain", "--out", str(teacher), "--steps", "7", *TINY], ["--out"]),
    ]
    for kind, path in folders.items():
        cases.append(BadInput(kind, ["distill", "--teacher", str(path), "--out", out], ["--teacher"]))
        if kind != "nan":
            cases.append(BadInput(kind, ["sample", "--checkpoint", str(path), "--out", png], ["--checkpoint"]))
            cases.append(BadInput(kind, ["evaluate", "--checkpoint", str(path)], ["--checkpoint"]))
    distill = ["distill", "--teacher", str(teacher), "--out", out]
    cases += [
        BadInput("range", [*distill, "--nfe", "0"], ["--nfe"]),
        BadInput("range", [*distill, "--steps", "0"], ["--steps"]),
        BadInput("type", [*distill, "--cmc-weight", "lots"], ["--cmc-weight"]),
        BadInput("nan", [*distill, "--cmc-weight", "nan"], ["--cmc-weight"]),
        BadInput("choice", [*distill, "--mode", "2d"], ["--mode"]),
        BadInput("wrong_content", ["distill", "--teacher", str(student), "--out", out], ["--teacher"]),
        BadInput("mixing", ["distill", "--teacher", str(teacher), "--out", str(student), "--steps", "5"], ["--out"]),
    ]
    for command in ("sample", "evaluate"):
        base = [command, "--checkpoint", str(student)] + (["--out", png] if command == "sample" else [])
        cases += [
            BadInput("range", [*base, "--nfe", "0"], ["--nfe"]),
            BadInput("range", [*base, "--n", "1"], ["--n"]),
            BadInput("range", [*base, "--n", "100000"], ["--n"]),
            BadInput("type", [*base, "--nfe", "four"], ["--nfe"]),
            BadInput("choice", [*base, "--mode", "2d"], ["--mode"]),
            BadInput("choice", [*base, "--device", "tpu"], ["--device"]),
        ]
    cases.append(BadInput("choice", ["sample", "--checkpoint", str(student), "--out", str(bad / "s.jpg")], ["--out"]))
    cases.append(BadInput("range", ["evaluate", "--checkpoint", str(student), "--fit-steps", "0"], ["--fit-steps"]))
    return cases


def test_every_bad_input_is_one_clean_error(trained, tmp_path):
    teacher, student = trained
    cases = _cases(teacher, student, tmp_path)
    check_bad_inputs(vision, [BadInput(c.kind, ["scene3d", *c.args], c.names) for c in cases],
                     tmp_path / "files" / "PICKLE_RAN")  # fmt: skip
    assert uncovered_commands(app, cases, KINDS) == []
    for command in KINDS:
        assert sum(c.args[0] == command for c in cases) >= 5
