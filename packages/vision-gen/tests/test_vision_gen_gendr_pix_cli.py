"""`flowlab vision sr train-teacher|distill|evaluate` and `flowlab vision upscale` on a tiny untrained autoencoder
(bad inputs: test_vision_gen_cli_bad_inputs.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from typer.testing import CliRunner

from flowlab.vision_gen.cli import vision
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder

TINY_AE = AutoencoderConfig(size=32, in_channels=3, latent_channels=8, channels=(4, 8, 8), dataset="photos")


@pytest.fixture(autouse=True)
def tiny_autoencoder(monkeypatch):
    """The commands read the kit's autoencoder from the cache: here a tiny untrained one of the same shape."""
    torch.manual_seed(0)
    ae = TinyAutoencoder(TINY_AE).eval().requires_grad_(False)
    monkeypatch.setattr("flowlab.vision_gen.kit.autoencoder.tiny_autoencoder", lambda config, device=None: ae)


@pytest.fixture
def models(tmp_path):
    run = CliRunner()
    teacher, student = tmp_path / "teacher", tmp_path / "student"
    res = run.invoke(vision, ["sr", "train-teacher", "--out", str(teacher), "--steps", "2", "--pairs", "16",
                              "--crop", "16"])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = run.invoke(vision, ["sr", "distill", "--teacher", str(teacher), "--out", str(student), "--stage1-steps", "1",
                              "--stage2-steps", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return teacher, student


def _png(path, size=(13, 9)):
    rgb = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(rgb).save(path)
    return path


def test_train_distill_evaluate_upscale(models, tmp_path):
    _, student = models
    assert json.loads((student / "config.json").read_text())["models"] == ["teacher", "stage1", "stage2"]
    run = CliRunner()
    table = tmp_path / "table.json"
    res = run.invoke(vision, ["sr", "evaluate", "--model", str(student), "--n", "4", "--size", "32", "--out",
                              str(table)])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = [json.loads(line)["model"] for line in res.output.splitlines() if line.startswith("{")]
    assert rows == ["bicubic", "teacher", "stage1", "stage2", "stage2 padcfg"]
    assert set(json.loads(table.read_text())["stage2"]) == {"psnr", "ssim", "artifact"}
    image = _png(tmp_path / "small.png")
    for extra, name in (([], "small_x4.png"), (["--mode", "padcfg", "--tile", "32", "--overlap", "8"], "tiled.png")):
        out = [] if not extra else ["--out", str(tmp_path / name)]
        res = run.invoke(vision, ["upscale", str(image), "--model", str(student), *out, *extra])
        assert res.exit_code == 0, res.output
        with Image.open(tmp_path / name) as im:
            assert im.size == (52, 36) and im.mode == "RGB"


def test_upscale_without_model_builds_the_default_student_once(tmp_path, monkeypatch):
    """No --model: the quick-recipe student (here a tiny recipe) is trained into the artifact cache on the first
    call and read from it on the next."""
    from flowlab.vision_gen.gendr_pix import pretrained
    from flowlab.vision_gen.gendr_pix.model import GenDRConfig

    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path / "cache"))
    recipe = GenDRConfig(autoencoder=TINY_AE, width=8, blocks=1, crop=16, pairs=16, batch_size=4, teacher_steps=2,
                         stage1_steps=1, stage2_steps=1)  # fmt: skip
    monkeypatch.setattr(pretrained, "QUICK_RECIPE", recipe)
    image = _png(tmp_path / "photo.png")
    run = CliRunner()
    for _ in range(2):
        res = run.invoke(vision, ["upscale", str(image)])
        assert res.exit_code == 0, res.output
        assert "default student" in res.output and "wrote 52x36" in res.output
    with Image.open(tmp_path / "photo_x4.png") as im:
        assert im.size == (52, 36)
    entry = pretrained.student_artifact(recipe)
    built = [p for p in (tmp_path / "cache" / "artifacts" / entry.name).iterdir() if p.is_dir()]
    assert [p.name for p in built] == [entry.key()]  # one build, reused
    with pytest.raises(ValueError, match="GenDRConfig"):
        pretrained.student_artifact(TINY_AE)
