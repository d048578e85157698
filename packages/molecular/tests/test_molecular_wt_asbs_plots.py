"""`flowlab molecular evaluate RUN --plot fes.png`: a valid PNG whose drawn grid is the run's FES: metad's fes.pt as
it is, or a sample run's histogram under its weights (checked against numpy's weighted histogram)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib.image import imread
from typer.testing import CliRunner

from flowlab.molecular.cli import app
from flowlab.molecular.wt_asbs import plots
from flowlab.molecular.wt_asbs.plots import plot_fes

KT = 2.494


@pytest.fixture
def drawn(monkeypatch) -> list[plots.FESPlot]:
    """The `FESPlot`s that `evaluate --plot` draws, in order."""
    seen = []

    def spy(*args, **kwargs):
        seen.append(plot_fes(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(plots, "plot_fes", spy)
    return seen


def _evaluate_plot(run: Path, png: Path, *extra: str) -> dict:
    res = CliRunner().invoke(app, ["evaluate", str(run), "--plot", str(png), *extra])
    assert res.exit_code == 0, res.output
    image = imread(png)  # a PNG matplotlib reads back, with something drawn on it
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.ndim == 3 and image.std() > 0
    return json.loads(res.output.strip().splitlines()[-1])


def _run(folder: Path, method: str, tensors: dict[str, dict[str, torch.Tensor]]) -> Path:
    folder.mkdir()
    config = {"method": method, "system": "aldp", "kT": KT, "energy_evals": 100}
    (folder / "config.json").write_text(json.dumps(config))
    for file, data in tensors.items():
        torch.save(data, folder / file)
    return folder


def test_metad_plot_draws_the_fes_it_holds(tmp_path, drawn):
    fes = 30 * torch.rand(40, 40, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 7.0
    run = _run(tmp_path / "metad", "metad", {"fes.pt": {"fes": fes}})
    report = _evaluate_plot(run, tmp_path / "fes.png")
    assert report["plot"] == str(tmp_path / "fes.png") and len(drawn) == 1
    (grid,) = drawn[0].grids.values()
    np.testing.assert_allclose(grid * KT + fes.min().item(), fes.numpy(), rtol=0, atol=1e-10)


def test_sample_plot_draws_the_weighted_histogram(tmp_path, drawn):
    gen = torch.Generator().manual_seed(1)
    n = 3000
    cvs = torch.stack([torch.randn(n, generator=gen) - 1.5, torch.randn(n, generator=gen) + 2.0], 1).double()
    cvs = torch.remainder(cvs + math.pi, 2 * math.pi) - math.pi
    bias = 3.0 * torch.rand(n, generator=gen, dtype=torch.float64)
    x = torch.zeros(n, 66)
    run = _run(tmp_path / "wt", "wt_asbs", {"samples.pt": {"x": x, "cvs": cvs, "bias": bias}})
    _evaluate_plot(run, tmp_path / "fes.png")
    _evaluate_plot(run, tmp_path / "plain.png", "--weights", "none")
    for plot, w in zip(drawn, (np.exp(bias.numpy() / KT), np.ones(n)), strict=True):
        phi, psi = cvs.numpy().T
        p, _, _ = np.histogram2d(psi, phi, bins=36, range=[(-math.pi, math.pi)] * 2, weights=w)
        with np.errstate(divide="ignore"):
            f = -np.log(p)
        expect = np.where(p > 0, f - f[p > 0].min(), np.nan)
        (grid,) = plot.grids.values()
        np.testing.assert_allclose(grid, expect, rtol=0, atol=1e-9)  # NaN where no sample: equal too
    assert np.isnan(grid).any() and not np.isnan(grid).all()


def test_plot_fes_refuses_what_it_cannot_draw(tmp_path):
    good = np.zeros((4, 4))
    cases = [((tmp_path / "a.jpg", {"F": good}, KT), "^path:"), ((tmp_path / "a.png", {}, KT), "^panels:"),
             ((tmp_path / "a.png", {"F": good[0]}, KT), "^panels: 'F'"),
             ((tmp_path / "a.png", {"F": good + math.inf}, KT), "^panels: 'F'"),
             ((tmp_path / "a.png", {"F": good * math.nan}, KT), "^panels: 'F'"),
             ((tmp_path / "a.png", {"F": good}, 0.0), "^kT:")]  # fmt: skip
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            plot_fes(*args)
    assert not list(tmp_path.iterdir())
