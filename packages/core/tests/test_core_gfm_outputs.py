"""What GFM users read: samples written as latitude/longitude read back as the points drawn, the MMD reported
unclipped beside its noise floor, and sample-density plots whose histogram holds every sample."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.gfm.cli import app
from flowlab.core.gfm.data import latlon_to_sphere, load_earth, save_table, sphere_to_latlon
from flowlab.core.gfm.evaluate import geodesic_mmd, mmd_split_floor
from flowlab.core.gfm.plot import chart, plot_density
from flowlab.core.manifolds import FlatTorus, PoincareBall, Sphere
from flowlab.core.metrics.mmd import mmd

S2 = Sphere(2)
TINY = ["--steps", "2", "--batch-size", "8", "--hidden", "8,8", "--no-progress"]


def _uniform(n: int, seed: int) -> torch.Tensor:
    return S2.random_uniform(n, generator=torch.Generator().manual_seed(seed))


def _png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, after checking the PNG signature."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_latlon_round_trips_through_the_sphere_and_a_csv(tmp_path):
    x = S2.random_uniform(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    lat_lon = sphere_to_latlon(x)
    assert lat_lon[:, 0].abs().max() <= 90 and lat_lon[:, 1].abs().max() <= 180
    torch.testing.assert_close(latlon_to_sphere(lat_lon), x, rtol=0, atol=1e-12)
    known = torch.tensor([[0.0, 0.0], [90.0, 0.0], [-30.0, 135.0]], dtype=torch.float64)
    torch.testing.assert_close(sphere_to_latlon(latlon_to_sphere(known)), known, rtol=0, atol=1e-12)
    save_table(tmp_path / "x.csv", lat_lon)
    torch.testing.assert_close(load_earth(str(tmp_path / "x.csv")), x.float(), rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"^x: expected shape"):
        sphere_to_latlon(torch.zeros(4, 2))


@pytest.mark.skipif(not os.environ.get("FLOWLAB_DATA"), reason="FLOWLAB_DATA is not set (earth_sphere data set)")
def test_latlon_of_the_shipped_earth_sets_is_their_own_columns():
    """Same column order and convention as the shipped CSVs: lat/lon of the loaded points are the file's numbers."""
    root = Path(os.environ["FLOWLAB_DATA"])
    for name in ("volcano", "earthquake", "flood"):
        table = torch.from_numpy(np.loadtxt(root / "earth_sphere" / f"{name}.csv", delimiter=",", ndmin=2))
        back = sphere_to_latlon(load_earth(name, root, dtype=torch.float64))
        lon_gap = torch.remainder(back[:, 1] - table[:, 1] + 180, 360) - 180  # 180 and -180 are one meridian
        torch.testing.assert_close(back[:, 0], table[:, 0], rtol=0, atol=1e-9)
        assert float((lon_gap.abs() * table[:, 0].abs().lt(90)).max()) < 1e-9  # a pole has no longitude


def test_mmd_is_unclipped_and_negative_on_two_samples_of_one_law():
    """Two independent uniform samples on S² (seeds 3 and 4): the unbiased MMD² is negative, and the MMD reported is
    its signed root, not 0. Over 40 such pairs (seeds 100..179) the MMD is negative about half the time."""
    x, y = _uniform(200, 3), _uniform(200, 4)
    sq = float(mmd(x.double(), y.double(), bandwidth=0.5, manifold=S2, unbiased=True))
    value = geodesic_mmd(x, y, manifold=S2, bandwidth=0.5)
    assert sq < 0 and value == -math.sqrt(-sq)
    signs = [geodesic_mmd(_uniform(200, s), _uniform(200, s + 1), manifold=S2, bandwidth=0.5) < 0
             for s in range(100, 180, 2)]  # fmt: skip
    assert 10 <= sum(signs) <= 30
    assert geodesic_mmd(x, latlon_to_sphere(torch.tensor([[60.0, 10.0]] * 200)), manifold=S2, bandwidth=0.5) > 0.3


def test_split_floor_is_the_size_of_the_mmd_between_half_size_samples_of_one_law():
    """The floor on 400 uniform points (seeds 0..2) is within a factor 1.5 of the RMS size of the MMD between
    independent 200-point samples (40 pairs), positive, and reproducible from its seed."""
    y = _uniform(400, 0)
    floors = [mmd_split_floor(y, manifold=S2, bandwidth=0.5, seed=s) for s in range(3)]
    pairs = [
        geodesic_mmd(_uniform(200, s), _uniform(200, s + 1), manifold=S2, bandwidth=0.5) for s in range(100, 180, 2)
    ]
    rms = float(np.mean(np.array(pairs) ** 4)) ** 0.25
    assert all(rms / 1.5 < f < 1.5 * rms for f in floors), (floors, rms)
    assert floors[0] == mmd_split_floor(y, manifold=S2, bandwidth=0.5, seed=0) > 0
    with pytest.raises(ValueError, match=r"^y: expected at least 4"):
        mmd_split_floor(y[:3], manifold=S2, bandwidth=0.5)
    with pytest.raises(ValueError, match=r"^draws"):
        mmd_split_floor(y, manifold=S2, bandwidth=0.5, draws=0)


@pytest.mark.parametrize(
    ("manifold", "pixels", "cells"),
    [(S2, (800, 400), (45, 90)), (FlatTorus(3), (500, 400), (45, 45)), (PoincareBall(2), (500, 400), (45, 45))],
)
def test_density_plot_is_a_png_whose_histogram_holds_every_sample(tmp_path, manifold, pixels, cells):
    g = torch.Generator().manual_seed(0)
    samples = manifold.random_base(700, generator=g)
    out = plot_density(samples, manifold.random_base(50, generator=g), manifold=manifold, path=tmp_path / "d.png")
    assert out.path == tmp_path / "d.png" and _png_size(out.path) == pixels
    assert out.counts.shape == cells and out.counts.sum() == 700


def test_density_plot_cells_are_in_latitude_and_longitude(tmp_path):
    """300 samples at (lat 10.5, lon -100.5) fill the one 4° cell holding that point: row (10.5 + 90) // 4, column
    (-100.5 + 180) // 4, the rows running south to north."""
    at = latlon_to_sphere(torch.tensor([[10.5, -100.5]] * 300))
    counts = plot_density(at, at[:1], manifold=S2, path=tmp_path / "d.png", bins=45).counts
    assert counts[25, 19] == 300 and counts.sum() == 300
    with pytest.raises(ValueError, match=r"^path: expected a \.png"):
        plot_density(at, at, manifold=S2, path=tmp_path / "d.jpg")
    with pytest.raises(ValueError, match=r"^samples: expected shape"):
        plot_density(at[:, :2], at, manifold=S2, path=tmp_path / "d.png")
    for manifold in (Sphere(3), FlatTorus(1), PoincareBall(3)):
        with pytest.raises(ValueError, match=r"^manifold: expected S²"):
            chart(manifold)


def test_cli_writes_latlon_samples_that_read_back_as_the_samples_and_train_again(tmp_path):
    """`sample --coords latlon` writes what `--coords ambient` writes, as (lat, lon) degrees that `load_earth` and
    `train --data latlon:PATH` read back; --plot draws them; `evaluate` reports the split floor beside the MMDs."""
    runner = CliRunner()
    data = tmp_path / "events.csv"
    save_table(data, sphere_to_latlon(latlon_to_sphere(torch.tensor([[40.0, -120.0]])) + 0.3 * _uniform(200, 1)))
    run = tmp_path / "run"
    assert runner.invoke(app, ["train", "--data", f"latlon:{data}", "--out", str(run), *TINY]).exit_code == 0
    draws = {}
    for coords, name in (("ambient", "x.pt"), ("latlon", "x.csv"), ("latlon", "ll.pt")):
        args = ["sample", "--run", str(run), "--out", str(tmp_path / name), "--n", "64", "--coords", coords]
        res = runner.invoke(app, [*args, "--plot", str(tmp_path / f"{name}.png")])
        assert res.exit_code == 0, res.output
        draws[name] = tmp_path / name
        assert _png_size(tmp_path / f"{name}.png") == (800, 400)
    x = torch.load(draws["x.pt"], weights_only=True)
    assert x.shape == (64, 3)
    torch.testing.assert_close(load_earth(str(draws["x.csv"])), x / x.norm(dim=-1, keepdim=True), rtol=0, atol=1e-6)
    lat_lon = torch.load(draws["ll.pt"], weights_only=True)
    assert lat_lon.shape == (64, 2)
    torch.testing.assert_close(latlon_to_sphere(lat_lon), x / x.norm(dim=-1, keepdim=True), rtol=0, atol=1e-6)
    args = ["train", "--data", f"latlon:{draws['x.csv']}", "--out", str(tmp_path / "again"), *TINY]
    assert runner.invoke(app, args).exit_code == 0  # samples fed back as data
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--nfe", "1", "--n", "40", "--no-nll"])
    assert res.exit_code == 0, res.output
    metrics = json.loads(res.output.strip().splitlines()[-1])
    assert metrics["mmd_split_floor"] > 0 and math.isfinite(metrics["mmd_nfe1"])


def test_cli_trains_on_a_tab_separated_degree_table_and_its_run_reads_it_back_in_degrees(tmp_path):
    """A user's torsion angles (phi, psi, chi in degrees, tab separated) train with `--angle-unit degrees` on T³; the
    run remembers the unit, so `evaluate` reloads the same points (an evaluation against the table read as radians
    would refuse it)."""
    g = torch.Generator().manual_seed(0)
    table = torch.tensor([-65.0, 140.0, 60.0]) + 12 * torch.randn(300, 3, generator=g)
    data = tmp_path / "torsions.tsv"
    data.write_text("".join("\t".join(f"{v:.3f}" for v in row) + "\n" for row in table.tolist()))
    run = tmp_path / "run"
    runner = CliRunner()
    res = runner.invoke(app, ["train", "--data", f"angles:{data}", "--angle-unit", "degrees", "--out", str(run), *TINY])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "config.json").read_text())["angle_unit"] == "degrees"
    res = runner.invoke(app, ["sample", "--run", str(run), "--out", str(tmp_path / "x.pt"), "--n", "16"])
    assert res.exit_code == 0, res.output
    x = torch.load(tmp_path / "x.pt", weights_only=True)
    assert x.shape == (16, 3) and bool(FlatTorus(3).belongs(x).all())
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--nfe", "1", "--n", "16", "--no-nll"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["train", "--data", f"angles:{data}", "--out", str(tmp_path / "radians"), *TINY])
    assert res.exit_code != 0 and "--angle-unit degrees" in res.output
