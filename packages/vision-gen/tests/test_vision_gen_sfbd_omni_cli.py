"""`flowlab vision sfbd run|restore` at toy size, resuming from its round checkpoints and never mixing two runs
(bad inputs: test_vision_gen_cli_bad_inputs.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowlab.vision_gen.cli import vision
from flowlab.vision_gen.kit.corruptions import PixelMask
from flowlab.vision_gen.kit.data import load_digits_images

TINY = ["--rounds", "1", "--pretrain-steps", "2", "--steps", "2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("sfbd") / "run"
    res = CliRunner().invoke(vision, ["sfbd", "run", "--out", str(out), "--corruption", "mask", "--p", "0.5",
                                      "--clean", "20", *TINY])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def test_run_writes_the_posterior_measures_and_images_and_resumes(trained):
    rows = [json.loads(line) for line in (trained / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [0, 1] and all(r["fd"] > 0 for r in rows)
    for name in ("posterior.safetensors", "config.json", "reconstructions.pt", "reconstructions.png"):
        assert (trained / name).is_file(), name
    assert torch.load(trained / "reconstructions.pt", weights_only=True).shape == (1257 - 20, 1, 8, 8)
    again = CliRunner().invoke(vision, ["sfbd", "run", "--out", str(trained), "--corruption", "mask", "--clean", "20",
                                        *TINY, "--resume"])  # fmt: skip
    assert again.exit_code == 0 and '"round"' not in again.output  # both rounds were read back from ckpt/
    other = CliRunner().invoke(vision, ["sfbd", "run", "--out", str(trained), "--corruption", "noise", *TINY])
    assert other.exit_code == 2 and "another run" in other.output, other.output  # never mixed into this run


def test_restore_reads_every_format(trained, tmp_path):
    x = load_digits_images(8, split="test").x[:12]
    y = PixelMask(0.5).sample(x, generator=torch.Generator().manual_seed(0))
    torch.save(y, tmp_path / "y.pt")
    np.save(tmp_path / "y.npy", y.numpy())
    for src in ("y.pt", "y.npy"):
        out = tmp_path / f"x_{src.split('.')[1]}.pt"
        res = CliRunner().invoke(vision, ["sfbd", "restore", "--model", str(trained), "--observations",
                                          str(tmp_path / src), "--out", str(out)])  # fmt: skip
        assert res.exit_code == 0, res.output
        restored = torch.load(out, weights_only=True)
        assert restored.shape == x.shape and bool(torch.isfinite(restored).all()) and out.with_suffix(".png").is_file()
    a, b = (torch.load(tmp_path / f"x_{kind}.pt", weights_only=True) for kind in ("pt", "npy"))
    assert a.equal(b)  # same observations and seed, same samples whatever the file format
