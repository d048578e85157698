"""`flowlab watermark keygen|embed|extract` round trip through key files, and a clear error for a corrupted key."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from flowlab.vision_gen.watermark.cli import app


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


def test_a_pickled_latents_file_is_refused_in_one_line(tmp_path):
    """A .pt holding a Python object (it would run code if unpickled fully) gives one clean line, exit 2."""
    import torch

    run = CliRunner()
    key, bad = tmp_path / "key", tmp_path / "bad.pt"
    assert run.invoke(app, ["keygen", "--out", str(key), "--method", "spherical", "--latent", "1x16x16"]).exit_code == 0
    torch.save({"payload": CliRunner}, bad)
    res = run.invoke(app, ["extract", "--key", str(key), "--latents", str(bad)])
    assert res.exit_code == 2 and "tensors" in res.output and "weights_only" not in res.output


def test_out_of_range_counts_and_rates_fail_in_one_line(tmp_path):
    run = CliRunner()
    key = tmp_path / "key"
    assert run.invoke(app, ["keygen", "--out", str(key), "--method", "spherical", "--latent", "1x16x16"]).exit_code == 0
    for n in ("0", "-3"):
        res = run.invoke(app, ["embed", "--key", str(key), "--out", str(tmp_path / "z.pt"), "--n", n])
        assert res.exit_code == 2 and "--n" in res.output and not (tmp_path / "z.pt").exists(), res.output
    res = run.invoke(app, ["extract", "--key", str(key), "--latents", str(tmp_path / "z.pt"), "--fpr", "1.5"])
    assert res.exit_code == 2 and "--fpr" in res.output, res.output
