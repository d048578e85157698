"""`flowlab watermark keygen|embed|extract` round trip through key files, a clear error for a corrupted key, and a
key replaced only when asked; PNG in, watermark detected, PNG out (`generate|attack|invert|detect|evaluate`) on the
digits model's schedule and on a saved diffusers pipeline (bad inputs: test_vision_gen_cli_bad_inputs.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn
from typer.testing import CliRunner

from flowlab.core.schedules import DiscreteVP
from flowlab.core.typing import Prediction
from flowlab.vision_gen.kit.generators import DIGITS_TEACHER
from flowlab.vision_gen.watermark import cli
from flowlab.vision_gen.watermark.benchmarks import E2E_QUICK, _teacher
from flowlab.vision_gen.watermark.cli import app
from flowlab.vision_gen.watermark.e2e import TEACHER


def test_keygen_embed_extract_round_trip(tmp_path):
    run = CliRunner()
    for method in ("spherical", "gaussian_shading"):
        key, z = tmp_path / method, tmp_path / f"{method}.pt"
        extra = ["--message-shape", "1x4x8"] if method == "gaussian_shading" else []
        res = run.invoke(app, ["keygen", "--out", str(key), "--method", method, "--latent", "1x16x16", *extra])
        assert res.exit_code == 0, res.output
        assert run.invoke(app, ["embed", "--key", str(key), "--out", str(z), "--n", "3"]).exit_code == 0
        args = ["extract", "--key", str(key), "--latents", str(z), "--message", str(z.with_suffix(".messages.pt"))]
        if method == "gaussian_shading":
            args += ["--nonces", str(z.with_suffix(".nonces.pt"))]
        res = run.invoke(app, args)
        assert res.exit_code == 0, res.output
        report = json.loads(res.output)
        assert all(report["detected"]) and report["matches"] == [32, 32, 32]
    (tmp_path / "spherical" / "key.json").write_text("{")
    res = run.invoke(
        app, ["extract", "--key", str(tmp_path / "spherical"), "--latents", str(tmp_path / "spherical.pt")]
    )
    assert res.exit_code != 0 and "not valid JSON" in res.output


def test_keygen_replaces_a_key_only_with_overwrite(tmp_path):
    run = CliRunner()
    key = tmp_path / "key"
    args = ["keygen", "--out", str(key), "--latent", "1x16x16"]
    assert run.invoke(app, args).exit_code == 0
    before = (key / "tensors.safetensors").read_bytes()
    res = run.invoke(app, [*args, "--seed", "1"])
    assert res.exit_code == 2 and "--overwrite" in res.output and (key / "tensors.safetensors").read_bytes() == before
    assert run.invoke(app, [*args, "--seed", "1", "--overwrite"]).exit_code == 0
    assert (key / "tensors.safetensors").read_bytes() != before


class GaussianDigits(nn.Module):
    """The exact epsilon prediction of data N(0, 0.35^2 I) under the digits teacher's schedule (DiscreteVP.linear):
    sigma x / (alpha^2 0.35^2 + sigma^2). It stands in for the trained teacher, whose build (about 9 min) a test
    cannot afford: sampling and DDIM inversion run as with the teacher and are exact up to discretisation, and the
    images (about 0.35 N(0, 1)) fit in [-1, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.schedule, self.prediction = DiscreteVP.linear(), Prediction.EPSILON

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        out = self.schedule(t.to(torch.float64))
        alpha, sigma = (v.to(x).view(-1, 1, 1, 1) for v in (out.alpha, out.sigma))
        return sigma * x / (alpha**2 * 0.35**2 + sigma**2)


def _ok(args: list) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.stdout


KEYGEN = {"spherical": [], "gaussian_shading": ["--message-shape", "1x4x8"], "tree_ring": ["--radius", "4"]}


@pytest.mark.parametrize("method", list(KEYGEN))
def test_png_in_attack_watermark_detected_with_its_key_only(tmp_path, monkeypatch, method):
    """generate (4 PNGs, 10 DPM-Solver++ steps) -> mild noise (std 0.01 of [0, 1], seed 0) -> detect (10-step DDIM
    inversion): every image is detected with its key at FPR 1 % (Spherical / Gaussian Shading: at least 24 of 32
    bits match, measured 32; Tree-Ring: distance below the 1 % quantile of Gaussian latents) and none with a key of
    another seed."""
    monkeypatch.setattr("flowlab.vision_gen.kit.generators.digits_denoiser", lambda config, device: GaussianDigits())
    for seed in ("0", "1"):
        _ok(["keygen", "--out", tmp_path / f"key{seed}", "--method", method, "--latent", "1x16x16", "--seed", seed,
             *KEYGEN[method]])  # fmt: skip
    gen, attacked = tmp_path / "gen", tmp_path / "attacked"
    assert "wrote 4" in _ok(["generate", "--key", tmp_path / "key0", "--out", gen, "--n", "4", "--steps", "10"])
    pngs = sorted(gen.glob("*.png"))
    assert [p.name for p in pngs] == [f"00000{i}.png" for i in range(4)]
    for path in pngs:
        with Image.open(path) as im:
            assert (im.format, im.size, im.mode) == ("PNG", (16, 16), "L")
    assert torch.load(gen / "latents.pt", weights_only=True).shape == (4, 1, 16, 16)
    _ok(["attack", *pngs, "--attack", "gaussian_noise", "--strength", "0.01", "--out", attacked])
    files = sorted(attacked.glob("*.png"))
    assert [p.name for p in files] == [p.name for p in pngs]
    expected = [] if method == "tree_ring" else ["--message", gen / "messages.pt"]
    expected += ["--nonces", gen / "nonces.pt"] if method == "gaussian_shading" else []
    read = [*files, *expected, "--steps", "10"]
    own, other = (json.loads(_ok(["detect", *read, "--key", tmp_path / f"key{s}"])) for s in "01")
    assert own["images"] == [str(p) for p in files] and all(own["detected"]) and not any(other["detected"])
    summary = json.loads(_ok(["evaluate", *read, "--key", tmp_path / "key0"]))
    assert summary["n"] == 4 and summary["detection_rate"] == 1.0
    if method != "tree_ring":
        assert min(own["matches"]) >= own["threshold"] == 24 and summary["bit_accuracy"] >= 0.9
        # invert, then extract from the latents file: the same reading
        _ok(["invert", *files, "--out", tmp_path / "z.pt", "--steps", "10"])
        latents = ["--latents", tmp_path / "z.pt", *expected]
        assert json.loads(_ok(["extract", "--key", tmp_path / "key0", *latents]))["bits"] == own["bits"]
        assert json.loads(_ok(["evaluate", "--key", tmp_path / "key0", *latents])) == summary


def test_the_default_model_is_built_into_the_cache_on_first_use(tmp_path, monkeypatch):
    """--model digits-teacher trains the teacher (here a 4-step, 8-channel one) into $FLOWLAB_CACHE on the first call,
    then generates and inverts with it: the build runs outside the sampler's inference mode."""
    from flowlab.core.artifacts import is_cached
    from flowlab.vision_gen.kit.train import digits_denoiser_artifact

    tiny = replace(TEACHER, steps=4, batch_size=8, base_channels=8)
    monkeypatch.setattr("flowlab.vision_gen.watermark.e2e.TEACHER", tiny)
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path / "cache"))
    _ok(["keygen", "--out", tmp_path / "key", "--latent", "1x16x16"])
    _ok(["generate", "--key", tmp_path / "key", "--out", tmp_path / "gen", "--n", "2", "--steps", "2"])
    assert is_cached(digits_denoiser_artifact(tiny))
    _ok(["invert", *sorted((tmp_path / "gen").glob("*.png")), "--out", tmp_path / "z.pt", "--steps", "2"])
    assert torch.load(tmp_path / "z.pt", weights_only=True).shape == (2, 1, 16, 16)


def test_attack_keeps_size_mode_and_names(tmp_path):
    rgb, grey = tmp_path / "rgb.png", tmp_path / "grey.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (9, 13, 3), dtype=np.uint8)).save(rgb)
    Image.fromarray(np.full((12, 12), 128, np.uint8)).save(grey)
    for attack in ("rotate", "jpeg", "random_crop", "median_filter"):
        _ok(["attack", rgb, grey, "--attack", attack, "--out", tmp_path / attack])
        for source, mode in ((rgb, "RGB"), (grey, "L")):
            with Image.open(source) as a, Image.open(tmp_path / attack / source.name) as b:
                assert (b.format, b.size, b.mode) == ("PNG", a.size, mode)


def test_diffusers_pipeline_folder_generates_inverts_and_reads(tmp_path, tiny_sd_pipeline):
    """A saved StableDiffusionPipeline (random weights: its VAE does not reconstruct, so no detection is claimed)
    runs as --model: 16x16 RGB PNGs from the key's 4x8x8 latents, their inversion, and a reading per image."""
    key, gen, model = tmp_path / "key", tmp_path / "gen", ["--model", tiny_sd_pipeline, "--prompt", "a cat"]
    _ok(["keygen", "--out", key, "--latent", "4x8x8", "--message-bits", "16", "--block-size", "16"])
    _ok(["generate", "--key", key, "--out", gen, "--n", "2", "--steps", "4", *model])
    pngs = sorted(gen.glob("*.png"))
    for path in pngs:
        with Image.open(path) as im:
            assert (im.format, im.size, im.mode) == ("PNG", (16, 16), "RGB")
    _ok(["invert", *pngs, "--out", tmp_path / "z.pt", "--steps", "4", *model])
    z = torch.load(tmp_path / "z.pt", weights_only=True)
    assert z.shape == (2, 4, 8, 8) and bool(torch.isfinite(z).all())
    report = json.loads(_ok(["detect", *pngs, "--key", key, "--message", gen / "messages.pt", "--steps", "4", *model]))
    assert len(report["bits"]) == 2 and all(len(b) == 16 for b in report["bits"])


def test_evaluate_describes_the_users_key_and_the_default_model_is_the_quick_benchmarks(tmp_path):
    _ok(["keygen", "--out", tmp_path / "key", "--latent", "1x16x16"])
    stats = json.loads(_ok(["evaluate", "--key", tmp_path / "key", "--n", "64"]))
    assert list(stats) == ["key"] and 0 <= stats["key"]["ks_min_p_bonf"] <= 1
    assert replace(TEACHER, device="cpu") == _teacher(E2E_QUICK, torch.device("cpu"))
    assert cli._DIGITS == DIGITS_TEACHER  # the CLI's default --model, spelt without importing the kit
