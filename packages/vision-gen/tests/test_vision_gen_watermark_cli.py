"""`flowlab watermark keygen|embed|extract` round trip through key files, a clear error for a corrupted key, and a
key replaced only when asked (bad inputs: test_vision_gen_cli_bad_inputs.py)."""

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
