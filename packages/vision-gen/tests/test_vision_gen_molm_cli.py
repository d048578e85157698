"""`flowlab watermark molm train|evaluate` end to end at toy size (train -> evaluate on held-out keys and on a key
folder), resume, and every kind of bad input (`flowlab.core.testing`) ending in one error naming the option (exit
2) before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.vision_gen.cli import app
from flowlab.vision_gen.watermark.base import write_key_folder
from flowlab.vision_gen.watermark.molm.store import save_molm_key

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--steps", "2", "--batch-size", "8", "--ae-steps", "2"]
KINDS = {
    "molm train": ["range", "type", "nan", "choice", "mixing"],
    "molm evaluate": ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "range",
                      "type", "choice"],
}  # fmt: skip


def _run(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(app, ["molm", *args])
    assert res.exit_code == code, res.output
    return res.output


def _json(output: str) -> dict:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("molm") / "model"
    _run("train", "--out", str(out), *TINY)
    return out


def test_train_then_evaluate(trained, tmp_path):
    assert {p.name for p in trained.iterdir()} >= {"config.json", "markers.safetensors", "extractor.safetensors"}
    row = _json(_run("evaluate", "--checkpoint", str(trained), "--n", "8", "--attacks", "clean,jpeg@50,pgd@0.03",
                     "--forge-keys", "2"))  # fmt: skip
    assert row["key_bits"] == 8 and 0 <= row["clean_bit_acc"] <= 1 and "jpeg50_tpr1" in row and "psnr" in row
    assert 0 <= row["forge1000_bit_acc"] <= 1 and row["forge_chance_lo"] < 0.5 < row["forge_chance_hi"]
    assert "forge_null_bit_acc" not in _json(_run("evaluate", "--checkpoint", str(trained), "--n", "4", "--attacks",
                                                  "clean"))  # fmt: skip
    save_molm_key(tmp_path / "key", torch.tensor([1, 0, 1, 0, 1, 1, 0, 0]))
    row = _json(_run("evaluate", "--checkpoint", str(trained), "--n", "4", "--attacks", "clean",
                     "--key", str(tmp_path / "key")))  # fmt: skip
    assert 0 <= row["clean_bit_acc"] <= 1


def test_resume_continues_the_run(trained, tmp_path):
    out = tmp_path / "model"
    _run("train", "--out", str(out), *TINY)
    _run("train", "--out", str(out), *TINY, "--resume")
    assert (out / "ckpt").is_dir()


def _cases(trained: Path, tmp: Path) -> list[BadInput]:
    def train(*extra: str) -> list[str]:
        return ["molm", "train", "--out", str(tmp / "fresh"), *TINY, *extra]

    def evaluate(*extra: str, checkpoint: Path = trained) -> list[str]:
        return ["molm", "evaluate", "--checkpoint", str(checkpoint), "--n", "4", *extra]

    files = bad_files(tmp / "bad", ".safetensors")
    pickled = tmp / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text((trained / "config.json").read_text())
    (pickled / "markers.safetensors").write_bytes(files["pickle"].read_bytes())
    (pickled / "extractor.safetensors").write_bytes(files["pickle"].read_bytes())
    empty = tmp / "empty"
    empty.mkdir()
    not_json = tmp / "not_json"
    not_json.mkdir()
    (not_json / "config.json").write_text("{nope")
    corrupt = tmp / "corrupt"
    corrupt.mkdir()
    (corrupt / "config.json").write_text((trained / "config.json").read_text())
    (corrupt / "markers.safetensors").write_bytes(b"\x00garbage" * 8)
    (corrupt / "extractor.safetensors").write_bytes((trained / "extractor.safetensors").read_bytes())
    shape = tmp / "shape"
    shape.mkdir()
    meta = json.loads((trained / "config.json").read_text())
    meta["model"]["rank"] = 2
    (shape / "config.json").write_text(json.dumps(meta))
    for name in ("markers.safetensors", "extractor.safetensors"):
        (shape / name).write_bytes((trained / name).read_bytes())
    write_key_folder(tmp / "short_key", "molm", {"key_bits": 8}, {"key": torch.ones(3, dtype=torch.uint8)})
    corrupt_key = tmp / "corrupt_key"
    save_molm_key(corrupt_key, torch.ones(8, dtype=torch.long))
    (corrupt_key / "tensors.safetensors").write_bytes(b"garbage")
    other_run = tmp / "other"
    other_run.mkdir()
    (other_run / "run.json").write_text(json.dumps({"command": "something else"}))
    (other_run / "weights.bin").write_text("x")
    return [
        BadInput("range", train("--steps", "0"), ["--steps"]),
        BadInput("range", train("--adapters", "3"), ["--adapters"]),
        BadInput("range", train("--ae-steps", "0"), ["--ae-steps"]),
        BadInput("range", train("--rank", "0"), ["--rank"]),
        BadInput("range", train("--seed", str(2**64)), ["--seed"]),
        BadInput("type", train("--steps", "many"), ["--steps"]),
        BadInput("nan", train("--lr", "nan"), ["--lr"]),
        BadInput("nan", train("--lam", "inf"), ["--lam"]),
        BadInput("nan", train("--forgery-weight", "nan"), ["--forgery-weight"]),
        BadInput("range", train("--forgery-weight", "1", "--batch-size", "8"), ["--batch-size"]),
        BadInput("choice", train("--device", "gpu"), ["--device"]),
        BadInput("mixing", ["molm", "train", "--out", str(trained), *TINY, "--steps", "3"], ["--out"]),
        BadInput("missing_file", evaluate(checkpoint=tmp / "nowhere"), ["--checkpoint"]),
        BadInput("empty_file", evaluate(checkpoint=empty), ["--checkpoint"]),
        BadInput("wrong_content", evaluate(checkpoint=not_json), ["--checkpoint"]),
        BadInput("pickle", evaluate(checkpoint=pickled), ["--checkpoint"]),
        BadInput("corrupt_file", evaluate(checkpoint=corrupt), ["--checkpoint"]),
        BadInput("shape", evaluate(checkpoint=shape), ["--checkpoint"]),
        BadInput("shape", evaluate("--key", str(tmp / "short_key")), ["--key"]),
        BadInput("corrupt_file", evaluate("--key", str(corrupt_key)), ["--key"]),
        BadInput("missing_file", evaluate("--key", str(tmp / "no_key")), ["--key"]),
        BadInput("range", evaluate("--n", "0"), ["--n"]),
        BadInput("range", evaluate("--attacks", "pgd@2"), ["--attacks"]),
        BadInput("type", evaluate("--n", "few"), ["--n"]),
        BadInput("range", evaluate("--forge-keys", "-1"), ["--forge-keys"]),
        BadInput("range", evaluate("--n", "4", "--forge-keys", "5"), ["--forge-keys"]),
        BadInput("choice", evaluate("--attacks", "clean,sharpen"), ["--attacks"]),
        BadInput("choice", evaluate("--device", "tpu"), ["--device"]),
    ]


def test_bad_inputs(trained, tmp_path):
    cases = _cases(trained, tmp_path)
    check_bad_inputs(app, cases, tmp_path / "bad" / "PICKLE_RAN")
    assert [c for c in uncovered_commands(app, cases, KINDS) if c.startswith("molm ")] == []
