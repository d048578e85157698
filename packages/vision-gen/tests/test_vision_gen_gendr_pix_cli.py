"""`flowlab vision sr train-teacher|distill|evaluate` and `flowlab vision upscale` on a tiny untrained autoencoder,
and one clear error line (exit 2) per bad input of each command."""

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


def test_distill_never_mixes_runs(models):
    teacher, student = models
    res = CliRunner().invoke(vision, ["sr", "distill", "--teacher", str(teacher), "--out", str(student),
                                      "--stage1-steps", "2"])  # fmt: skip
    assert res.exit_code == 2 and "another run" in res.output, res.output


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["train-teacher", "--steps", "0"], "teacher_steps"),
        (["train-teacher", "--crop", "20"], "crop"),
        (["train-teacher", "--pairs", "0"], "pairs"),
        (["train-teacher", "--lr", "-1"], "lr"),
        (["train-teacher", "--device", "tpu"], "device"),
        (["distill", "--teacher", "nosuchfolder"], "--teacher"),
        (["distill", "--teacher", "{corrupt}"], "--teacher"),
        (["evaluate", "--model", "nosuchfolder"], "--model"),
        (["evaluate", "--model", "{corrupt}"], "--model"),
        (["evaluate", "--model", "{empty}"], "--model"),
    ],
)
def test_sr_bad_input_is_one_clear_line(args, word, tmp_path):
    corrupt, empty = tmp_path / "corrupt", tmp_path / "empty"
    corrupt.mkdir()
    empty.mkdir()
    (corrupt / "config.json").write_text("{not json")
    args = [a.format(corrupt=corrupt, empty=empty) for a in args]
    out = ["--out", str(tmp_path / "out")] if args[0] != "evaluate" else []
    res = CliRunner().invoke(vision, ["sr", *args, *out])
    assert res.exit_code == 2, res.output
    assert word in res.output and "Traceback" not in res.output


def test_sr_distill_and_evaluate_range_errors(models, tmp_path):
    teacher, student = models
    run = CliRunner()
    res = run.invoke(vision, ["sr", "distill", "--teacher", str(teacher), "--out", str(tmp_path / "o"),
                              "--stage1-steps", "0"])  # fmt: skip
    assert res.exit_code == 2 and "stage1_steps" in res.output, res.output
    res = run.invoke(vision, ["sr", "distill", "--teacher", str(student / "stage2.safetensors"), "--out",
                              str(tmp_path / "o2")])  # fmt: skip
    assert res.exit_code == 2 and "--teacher" in res.output, res.output
    for args, word in ((["--n", "0"], "--n"), (["--size", "20"], "--size"), (["--device", "gpu"], "device")):
        res = run.invoke(vision, ["sr", "evaluate", "--model", str(student), *args])
        assert res.exit_code == 2 and word in res.output, res.output


def test_upscale_bad_input_is_one_clear_line(models, tmp_path):
    _, student = models
    good = _png(tmp_path / "good.png")
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_text("this is not a jpeg")
    (tmp_path / "pic.gif").write_bytes(b"GIF89a")
    cases = [
        ([str(tmp_path / "missing.png")], "not found"),
        ([str(empty)], "cannot read"),
        ([str(corrupt)], "cannot read"),
        ([str(tmp_path / "pic.gif")], "IMAGE"),
        ([str(good), "--scale", "2"], "--scale"),
        ([str(good), "--mode", "tta"], "--mode"),
        ([str(good), "--tile", "4"], "--tile"),
        ([str(good), "--out", str(tmp_path / "x.bmp")], "--out"),
        ([str(good), "--model", str(tmp_path)], "--model"),
    ]
    run = CliRunner()
    for args, word in cases:
        model = [] if "--model" in args else ["--model", str(student)]
        res = run.invoke(vision, ["upscale", *args, *model])
        assert res.exit_code == 2, (args, res.output)
        assert word in res.output and "Traceback" not in res.output, (args, res.output)


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
