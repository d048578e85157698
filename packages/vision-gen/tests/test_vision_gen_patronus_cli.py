"""`flowlab vision patronus train|sample|explain` end to end at toy size (train -> sample -> explain), resumed
bit-exactly, and every kind of bad input (`flowlab.core.testing`) ending in one error naming the option or file
(exit 2) before any work."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from flowlab.core.testing import (
    BadInput,
    assert_same_tensors,
    bad_files,
    check_bad_inputs,
    ctrl_c_at,
    uncovered_commands,
)
from flowlab.vision_gen.cli import vision
from flowlab.vision_gen.patronus import train as patronus_train
from flowlab.vision_gen.patronus.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--num-prototypes", "4", "--base-channels", "8", "--batch-size", "8", "--prior-steps", "2"]
KINDS = {
    "train": ["range", "type", "nan", "choice", "mixing"],
    "sample": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range", "type",
               "nan", "choice"],
    "explain": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range", "type",
                "nan", "choice"],
}  # fmt: skip


def _run(*args: str, code: int = 0) -> str:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        res = CliRunner().invoke(vision, ["patronus", *args])
    assert res.exit_code == code, res.output
    return res.output


def _json(output: str) -> dict:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("patronus") / "model"
    _run("train", "--out", str(out), "--steps", "3", *TINY)
    return out


def test_train_sample_explain(trained, tmp_path):
    meta = json.loads((trained / "config.json").read_text())
    assert meta["model"]["variant"] == "patronus" and meta["train"]["steps"] == 3 and meta["prior"]["steps"] == 2
    for mode in ("recon", "uncond"):
        png = tmp_path / f"{mode}.png"
        row = _json(_run("sample", "--checkpoint", str(trained), "--out", str(png), "--mode", mode, "--n", "12",
                         "--steps", "2", "--fd"))  # fmt: skip
        assert row["mode"] == mode and row["fd"] > 0 and png.read_bytes()[:4] == b"\x89PNG"
    for what in ("prototypes", "where", "when", "manipulate"):
        png = tmp_path / f"{what}.png"
        row = _json(_run("explain", "--checkpoint", str(trained), "--plot", str(png), "--what", what, "--n", "6",
                         "--steps", "2"))  # fmt: skip
        assert row["what"] == what and png.read_bytes()[:4] == b"\x89PNG"
    where = _json(_run("explain", "--checkpoint", str(trained), "--plot", str(tmp_path / "w.png"), "--what", "where",
                       "--n", "6", "--steps", "2"))  # fmt: skip
    # the shares are over the pairs a boost changed; a 3-step model may change none (n = 0, no shares)
    assert {"area", "n"} <= set(where) and (where["n"] == 0 or {"inside", "random"} <= set(where))


def test_diffae_and_shortcut_train(tmp_path):
    out = tmp_path / "diffae"
    _run("train", "--out", str(out), "--steps", "1", "--variant", "diffae", "--shortcut", *TINY)
    row = _json(_run("sample", "--checkpoint", str(out), "--out", str(tmp_path / "d.png"), "--n", "4", "--steps", "1"))
    assert row["variant"] == "diffae"
    assert "no prototypes" in _run("explain", "--checkpoint", str(out), "--plot", str(tmp_path / "e.png"), code=2)


def test_train_resumes_bit_exactly(tmp_path, monkeypatch):
    """Stopped by Ctrl-C at the third of four steps (checkpoints each step), resumed, equal to one whole run."""
    args = ["train", "--steps", "4", *TINY]
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, patronus_train, "patronus_loss", 3)
        _run(*args, "--out", str(tmp_path / "a"), code=130)
    assert "pass --resume" in _run(*args, "--out", str(tmp_path / "a"), code=2)
    _run(*args, "--out", str(tmp_path / "a"), "--resume")
    _run(*args, "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/*.pt")
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "*.safetensors")
    assert "another run" in _run(*args, "--steps", "5", "--out", str(tmp_path / "a"), code=2)


def _bad_checkpoints(root: Path, good: Path) -> dict[str, tuple[str, Path]]:
    """kind -> copies of the saved folder with a bad weights file or config, and a missing and an empty folder."""
    files = bad_files(root / "files", ".safetensors", like=good / "model.safetensors")
    folders: dict[str, tuple[str, Path]] = {"missing": ("missing_file", root / "missing")}
    (root / "hollow").mkdir(parents=True)
    folders["hollow"] = ("empty_file", root / "hollow")
    for name, kind in (("empty", "empty_file"), ("garbage", "corrupt_file"), ("truncated", "corrupt_file"),
                       ("pickle", "pickle")):  # fmt: skip
        folder = Path(shutil.copytree(good, root / name))
        shutil.copy(files[name], folder / "model.safetensors")
        folders[name] = (kind, folder)
    broken = Path(shutil.copytree(good, root / "broken"))
    (broken / "config.json").write_text("{not json")
    other = Path(shutil.copytree(good, root / "other"))
    (other / "config.json").write_text(json.dumps({"format": "something else", "version": 7}))
    shape = Path(shutil.copytree(good, root / "shape"))
    meta = json.loads((good / "config.json").read_text())
    meta["model"]["num_prototypes"] = 5
    (shape / "config.json").write_text(json.dumps(meta))
    nan = Path(shutil.copytree(good, root / "nan"))
    weights = load_file(good / "model.safetensors")
    weights["encoder.prototypes"][0, 0] = float("nan")
    save_file(weights, nan / "model.safetensors")
    folders |= {"broken": ("corrupt_file", broken), "other": ("wrong_content", other), "shape": ("shape", shape),
                "nan": ("nan", nan)}  # fmt: skip
    return folders


def _cases(trained: Path, tmp: Path) -> list[BadInput]:
    out, counter = tmp / "out", itertools.count()

    def train() -> list[str]:
        return ["train", "--out", str(out / f"{next(counter)}"), "--steps", "1", *TINY]

    def sample() -> list[str]:
        return ["sample", "--checkpoint", str(trained), "--out", str(out / "s.png"), "--n", "4", "--steps", "1"]

    def explain() -> list[str]:
        return ["explain", "--checkpoint", str(trained), "--plot", str(out / "e.png"), "--n", "4", "--steps", "1"]

    cases = []
    for kind, path in _bad_checkpoints(tmp / "bad", trained).values():
        cases.append(BadInput(kind, ["sample", "--checkpoint", str(path), "--out", str(out / "s.png")],
                              ["--checkpoint", str(path)]))  # fmt: skip
        cases.append(BadInput(kind, ["explain", "--checkpoint", str(path), "--plot", str(out / "e.png")],
                              ["--checkpoint", str(path)]))  # fmt: skip
    for kind, base, bad in (
        ("range", train, [("--steps", "0"), ("--batch-size", "0"), ("--lr", "0"), ("--num-prototypes", "0"),
                          ("--base-channels", "0"), ("--prior-steps", "0"), ("--distinct-weight", "-1"),
                          ("--size", "12"), ("--seed", str(2**64))]),
        ("type", train, [("--steps", "many"), ("--lr", "fast"), ("--seed", "x")]),
        ("nan", train, [("--lr", "nan"), ("--distinct-weight", "inf")]),
        ("choice", train, [("--variant", "vae"), ("--proto-init", "zeros"), ("--device", "gpu")]),
        ("range", sample, [("--n", "1"), ("--n", "300"), ("--steps", "0"), ("--seed", str(2**64))]),
        ("type", sample, [("--n", "ten"), ("--steps", "x")]),
        ("nan", sample, [("--n", "nan")]),
        ("choice", sample, [("--mode", "both"), ("--out", str(out / "s.gif")), ("--device", "gpu")]),
        ("range", explain, [("--n", "1"), ("--steps", "0"), ("--prototype", "4"), ("--prototype", "-2")]),
        ("type", explain, [("--n", "ten"), ("--prototype", "first")]),
        ("nan", explain, [("--steps", "nan")]),
        ("choice", explain, [("--what", "why"), ("--plot", str(out / "e.jpg")), ("--device", "gpu")]),
    ):  # fmt: skip
        cases += [BadInput(kind, [*base(), *args], [args[0]]) for args in bad]
    cases.append(BadInput("mixing", ["train", "--out", str(trained), "--steps", "4", *TINY], ["--out"]))
    return cases


def test_bad_inputs(trained, tmp_path):
    cases = _cases(trained, tmp_path)
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "bad" / "files" / "PICKLE_RAN")
    assert not (tmp_path / "out").exists(), sorted(str(p) for p in (tmp_path / "out").rglob("*"))
    assert uncovered_commands(app, cases, KINDS) == []
