"""`flowlab vision promoe train|analyse` end to end at toy size, resumed bit-exactly, and every kind of bad input
(`flowlab.core.testing`) ending in one error naming the option or file (exit 2) before any work."""

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
from flowlab.vision_gen.promoe import train as promoe_train
from flowlab.vision_gen.promoe.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--dim", "16", "--depth", "2", "--num-routed", "3", "--batch-size", "8"]
KINDS = {
    "train": ["range", "type", "nan", "choice", "mixing"],
    "analyse": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range", "type",
                "nan", "choice"],
}  # fmt: skip


def _run(*args: str, code: int = 0) -> str:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        res = CliRunner().invoke(vision, ["promoe", *args])
    assert res.exit_code == code, res.output
    return res.output


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("promoe") / "model"
    _run("train", "--out", str(out), "--steps", "3", *TINY)
    return out


def test_train_then_analyse(trained, tmp_path):
    meta = json.loads((trained / "config.json").read_text())
    assert meta["model"]["variant"] == "promoe" and meta["train"]["steps"] == 3
    png = tmp_path / "heat.png"
    output = _run("analyse", "--checkpoint", str(trained), "--n", "20", "--samples", "20", "--sample-steps", "2",
                  "--cfg", "1.5", "--plot", str(png))  # fmt: skip
    row = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    assert row["variant"] == "promoe" and row["null_to_uncond"] == 1.0 and row["cfg"] == 1.5
    assert {"nmi", "js_divergence", "subspace_similarity", "fd", "fd_floor", "accuracy"} <= set(row)
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_every_variant_and_ddpm_train(tmp_path):
    for variant, objective in (
        ("tc", "rf"),
        ("ec", "rf"),
        ("diffmoe", "rf"),
        ("promoe_kmeans", "rf"),
        ("dense", "ddpm"),
    ):
        out = tmp_path / variant
        _run("train", "--out", str(out), "--steps", "1", "--variant", variant, "--objective", objective, *TINY)
        row = json.loads(_run("analyse", "--checkpoint", str(out), "--n", "10").splitlines()[0])
        assert row["variant"] == variant and (variant != "dense" or "nmi" not in row)


def test_train_resumes_bit_exactly(tmp_path, monkeypatch):
    """Stopped by Ctrl-C at the third of four steps (checkpoints each step), resumed, equal to one whole run."""
    args = ["train", "--steps", "4", *TINY]
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, promoe_train, "promoe_loss", 3)
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
    meta["model"]["dim"] = 32
    (shape / "config.json").write_text(json.dumps(meta))
    nan = Path(shutil.copytree(good, root / "nan"))
    weights = load_file(good / "model.safetensors")
    weights["out.weight"][0, 0] = float("nan")
    save_file(weights, nan / "model.safetensors")
    folders |= {"broken": ("corrupt_file", broken), "other": ("wrong_content", other), "shape": ("shape", shape),
                "nan": ("nan", nan)}  # fmt: skip
    return folders


def _cases(trained: Path, tmp: Path) -> list[BadInput]:
    out, counter = tmp / "out", itertools.count()

    def train() -> list[str]:
        return ["train", "--out", str(out / f"{next(counter)}"), "--steps", "1", *TINY]

    def analyse() -> list[str]:
        return ["analyse", "--checkpoint", str(trained), "--n", "10"]

    cases = [BadInput(kind, ["analyse", "--checkpoint", str(path)], ["--checkpoint", str(path)])
             for kind, path in _bad_checkpoints(tmp / "bad", trained).values()]  # fmt: skip
    for kind, base, bad in (
        ("range", train, [("--steps", "0"), ("--batch-size", "0"), ("--lr", "0"), ("--dim", "30"), ("--depth", "0"),
                          ("--num-routed", "0"), ("--rcl-weight", "-1"), ("--size", "12"), ("--seed", str(2**64))]),
        ("type", train, [("--steps", "many"), ("--lr", "fast"), ("--seed", "x")]),
        ("nan", train, [("--lr", "nan"), ("--rcl-weight", "inf")]),
        ("choice", train, [("--variant", "moe"), ("--objective", "edm"), ("--device", "gpu")]),
        ("range", analyse, [("--n", "5"), ("--n", "300"), ("--samples", "1"), ("--cfg", "-1"), ("--sample-steps", "0"),
                            ("--seed", str(2**64))]),
        ("type", analyse, [("--n", "ten"), ("--cfg", "big"), ("--seed", "x")]),
        ("nan", analyse, [("--cfg", "nan")]),
        ("choice", analyse, [("--plot", str(out / "heat.gif")), ("--device", "gpu")]),
    ):  # fmt: skip
        cases += [BadInput(kind, [*base(), *args], [args[0]]) for args in bad]
    cases.append(BadInput("mixing", ["train", "--out", str(trained), "--steps", "4", *TINY], ["--out"]))
    return cases


def test_bad_inputs(trained, tmp_path):
    cases = _cases(trained, tmp_path)
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "bad" / "files" / "PICKLE_RAN")
    assert not (tmp_path / "out").exists(), sorted(str(p) for p in (tmp_path / "out").rglob("*"))
    assert uncovered_commands(app, cases, KINDS) == []
