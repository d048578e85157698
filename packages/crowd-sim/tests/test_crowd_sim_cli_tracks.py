"""A user's own 4-column files through `flowlab crowd train`, `predict --protocol forecast` and
`evaluate --protocol forecast` (the README's three commands), on generated files; clear errors on misuse."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.crowd_sim.cli import app

runner = CliRunner()


def _write_tracks(path: Path, seed: int, people: int = 8, frames: int = 40) -> Path:
    """ETH/UCY-style "frame ped_id x y" lines at 2.5 fps (frame numbers step by 10): pedestrians walking gently
    curving paths at 1-1.6 m/s, entering at staggered frames."""
    g = torch.Generator().manual_seed(seed)
    lines = []
    for p in range(people):
        start = torch.rand(2, generator=g) * 12
        heading = float(torch.rand(1, generator=g)) * 2 * math.pi
        speed, turn = 1.0 + 0.6 * float(torch.rand(1, generator=g)), 0.05 * float(torch.randn(1, generator=g))
        first = (3 * p) % 12
        x, y = float(start[0]), float(start[1])
        for f in range(first, frames):
            angle = heading + turn * f
            x, y = x + 0.4 * speed * math.cos(angle), y + 0.4 * speed * math.sin(angle)
            lines.append(f"{10 * f}\t{p + 1}\t{x:.4f}\t{y:.4f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_predict_evaluate_on_a_users_files(tmp_path):
    train_a, train_b = _write_tracks(tmp_path / "a.txt", 0), _write_tracks(tmp_path / "b.txt", 1)
    test = _write_tracks(tmp_path / "test.txt", 2)
    model = tmp_path / "m.pt"
    res = runner.invoke(app, ["train", "--tracks", str(train_a), "--tracks", str(train_b), "--fps", "2.5",
                              "--goal", "constant_velocity", "--epochs", "1", "--out", str(model)])  # fmt: skip
    assert res.exit_code == 0, res.output
    pred = tmp_path / "pred.pt"
    res = runner.invoke(app, ["predict", "--checkpoint", str(model), "--tracks", str(test), "--fps", "2.5",
                              "--protocol", "forecast", "--samples", "3", "--sampler", "ddim", "--sample-steps", "2",
                              "--out", str(pred)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "sequences" in res.output
    scores = tmp_path / "scores.json"
    res = runner.invoke(app, ["evaluate", "--protocol", "forecast", str(pred), "--out", str(scores)])
    assert res.exit_code == 0, res.output
    metrics = json.loads(scores.read_text())
    assert metrics["k"] == 3 and metrics["pedestrians"] > 0 and 0 < metrics["min_ade"] < metrics["min_fde"] < 10
    # constant velocity through the same path: its minADE is the plain extrapolation error of the test file
    cv = tmp_path / "cv.pt"
    res = runner.invoke(app, ["predict", "--baseline", "cv", "--tracks", str(test), "--fps", "2.5",
                              "--protocol", "forecast", "--samples", "1", "--out", str(cv)])  # fmt: skip
    assert res.exit_code == 0, res.output
    blob = torch.load(cv, weights_only=True)
    h, f = blob["history"], blob["future"]
    step = h[:, -1] - h[:, -2]
    expect = h[:, -1, None] + step[:, None] * torch.arange(1, 13)[None, :, None]
    torch.testing.assert_close(blob["pred"][0], expect, rtol=0, atol=1e-4)
    assert f.shape == expect.shape


def test_misuse_is_reported_against_the_option(tmp_path):
    tracks = _write_tracks(tmp_path / "a.txt", 0)
    model = tmp_path / "m.pt"
    res = runner.invoke(app, ["train", "--tracks", str(tracks), "--epochs", "1", "--out", str(model)])
    assert res.exit_code != 0 and "--tracks" in res.output and "fps" in res.output
    res = runner.invoke(app, ["train", "--tracks", str(tracks), "--fps", "2.5", "--goal", "ahead", "--out", str(model)])
    assert res.exit_code != 0 and "goal" in res.output
    res = runner.invoke(app, ["train", "--tracks", str(tracks), "--fps", "2.5", "--inits", "2", "--out", str(model)])
    assert res.exit_code != 0 and "--val-tracks" in res.output
    res = runner.invoke(app, ["train", "--tracks", str(tracks), "--fps", "2.5", "--epochs", "1", "--out", str(model)])
    assert res.exit_code == 0, res.output
    # a model trained towards recorded destinations cannot forecast without them
    res = runner.invoke(app, ["predict", "--checkpoint", str(model), "--tracks", str(tracks), "--fps", "2.5",
                              "--protocol", "forecast", "--samples", "1", "--out", str(tmp_path / "p.pt")])  # fmt: skip
    assert res.exit_code != 0 and "recorded destinations" in res.output
    res = runner.invoke(app, ["predict", "--baseline", "cv", "--tracks", str(tracks), "--fps", "2.5",
                              "--out", str(tmp_path / "p.pt")])  # fmt: skip
    assert res.exit_code != 0 and "--protocol forecast" in res.output
    res = runner.invoke(app, ["evaluate", "--protocol", "forecast", str(model)])
    assert res.exit_code != 0 and "forecast" in res.output


@pytest.mark.parametrize("fps", ["0", "-2.5"])
def test_the_frame_rate_must_be_positive(tmp_path, fps):
    tracks = _write_tracks(tmp_path / "a.txt", 0)
    res = runner.invoke(app, ["train", "--tracks", str(tracks), "--fps", fps, "--out", str(tmp_path / "m.pt")])
    assert res.exit_code != 0 and ("fps" in res.output or "time_unit" in res.output)
