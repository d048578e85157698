"""GFM data: earth CSV loader and its error cases, splits, angle tables, the torus and Poincaré mixtures (their
densities integrate to 1 and their samples match the density's moments)."""

from __future__ import annotations

import math
import os

import pytest
import torch

from flowlab.core.gfm import (
    latlon_to_sphere,
    load_angles,
    load_earth,
    poincare_mixture,
    random_torus_mixture,
    split,
    torus_mixture,
)
from flowlab.core.manifolds import PoincareBall


@pytest.fixture(autouse=True)
def _single_thread():
    """Two torch threads on the shared, loaded 2-core machine are several times slower than one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _write(tmp_path, text, name="events.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_latlon_to_sphere_known_points():
    x = latlon_to_sphere(torch.tensor([[0.0, 0.0], [90.0, 123.0], [0.0, 90.0], [-45.0, 180.0]], dtype=torch.float64))
    h = math.sqrt(0.5)
    want = torch.tensor([[1.0, 0, 0], [0, 0, 1], [0, 1, 0], [-h, 0, -h]], dtype=torch.float64)
    assert torch.allclose(x, want, atol=1e-12)


def test_load_earth_from_a_file_and_rejects_bad_files(tmp_path):
    x = load_earth(_write(tmp_path, "10.5,20\n-30,170.25\n"))
    assert x.shape == (2, 3) and torch.allclose(x.norm(dim=-1), torch.ones(2))
    with pytest.raises(ValueError, match="2 columns"):
        load_earth(_write(tmp_path, "1,2,3\n4,5,6\n", "three.csv"))
    with pytest.raises(ValueError, match=r"\[-90, 90\]"):
        load_earth(_write(tmp_path, "95,10\n", "lat.csv"))
    with pytest.raises(ValueError, match="NaN"):
        load_earth(_write(tmp_path, "nan,10\n1,2\n", "nan.csv"))
    with pytest.raises(FileNotFoundError, match="earth_sphere"):
        load_earth("volcano", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"^root: the earth_sphere data set \(volcano.csv\) needs"):
        load_earth("volcano")
    with pytest.raises(ValueError, match="name"):
        load_earth("not-a-set")


@pytest.mark.skipif(not os.environ.get("FLOWLAB_DATA"), reason="FLOWLAB_DATA is not set (earth_sphere data set)")
def test_load_earth_shared_data_and_split():
    x = load_earth("volcano", os.environ["FLOWLAB_DATA"])
    assert x.shape == (827, 3) and float((x.norm(dim=-1) - 1).abs().max()) < 1e-6
    parts = split(x, 0)
    assert (len(parts.train), len(parts.val), len(parts.test)) == (661, 83, 83)


def test_split_is_a_seeded_disjoint_partition():
    x = torch.arange(100.0)[:, None]
    a, b, c = split(x, 0), split(x, 0), split(x, 1)
    assert torch.equal(a.test, b.test) and not torch.equal(a.test, c.test)
    rows = torch.cat([a.train, a.val, a.test]).squeeze(1).sort().values
    assert torch.equal(rows, x.squeeze(1)) and (len(a.train), len(a.val), len(a.test)) == (80, 10, 10)
    with pytest.raises(ValueError, match="fractions"):
        split(x, 0, (0.5, 0.1, 0.1))


def test_load_angles_wraps_and_converts_degrees(tmp_path):
    x = load_angles(_write(tmp_path, "180,-90\n350,0\n"), degrees=True, dtype=torch.float64)
    want = torch.tensor([[-math.pi, -math.pi / 2], [math.radians(-10), 0.0]], dtype=torch.float64)
    assert torch.allclose(x, want, atol=1e-12)
    with pytest.raises(FileNotFoundError, match="path"):
        load_angles(tmp_path / "missing.csv")


def test_load_angles_reads_tab_separated_tables_and_refuses_the_wrong_unit(tmp_path):
    """A .tsv table is read tab separated, in either convention ([-π, π) or [0, 2π)); degrees read as radians, or
    values beyond 360 as degrees, are an error naming the range found and the other unit."""
    tsv = tmp_path / "torsions.tsv"
    tsv.write_text("-3.1\t6.2\n0.5\t1.0\n")
    x = load_angles(tsv, dtype=torch.float64)
    assert torch.allclose(x[0], torch.tensor([-3.1, 6.2 - 2 * math.pi], dtype=torch.float64))
    degrees = _write(tmp_path, "-65.0,140.5\n-120,130\n")
    with pytest.raises(ValueError, match=r"from -120 to 140.5, outside the radians range .*--angle-unit degrees"):
        load_angles(degrees)
    assert torch.allclose(load_angles(degrees, degrees=True)[0], torch.tensor([-65.0, 140.5]).deg2rad())
    with pytest.raises(ValueError, match=r"outside the degrees range \[-180, 360\]"):
        load_angles(_write(tmp_path, "10,370\n"), degrees=True)


def test_torus_mixture_density_integrates_to_one_and_matches_samples():
    mix = random_torus_mixture(2, components=3, scale=0.6, generator=torch.Generator().manual_seed(0))
    n = 200
    a = -math.pi + 2 * math.pi * (torch.arange(n, dtype=torch.float64) + 0.5) / n
    grid = torch.stack(torch.meshgrid(a, a, indexing="ij"), -1).reshape(-1, 2)
    p = mix.log_prob(grid).exp()
    cell = (2 * math.pi / n) ** 2
    assert abs(float(p.sum() * cell) - 1) < 1e-6
    x = mix.sample(40_000, generator=torch.Generator().manual_seed(1))
    for f in (torch.cos, torch.sin):  # circular moments: Monte Carlo vs quadrature, ~5 standard errors
        want, got = (f(grid) * p[:, None]).sum(0) * cell, f(x).mean(0)
        assert torch.allclose(got, want, atol=0.02)
    same = torus_mixture(10, 2, means=mix.means, scale=0.6, generator=torch.Generator().manual_seed(2))
    assert same.shape == (10, 2) and bool(((same >= -math.pi) & (same < math.pi)).all())


def test_poincare_mixture_density_integrates_to_one_and_samples_sit_at_the_means():
    mix = poincare_mixture(components=6, radius=1.5, scale=0.3)
    assert torch.allclose(
        PoincareBall(2).dist(torch.zeros_like(mix.means), mix.means), torch.full((6,), 1.5, dtype=torch.float64)
    )
    # polar quadrature of p dV_g, dV_g = lambda(x)^2 dx, over the Euclidean radius in [0, 0.95]
    nr, na = 400, 360
    r = 0.95 * (torch.arange(nr, dtype=torch.float64) + 0.5) / nr
    a = 2 * math.pi * torch.arange(na, dtype=torch.float64) / na
    rr, aa = torch.meshgrid(r, a, indexing="ij")
    pts = torch.stack([rr * aa.cos(), rr * aa.sin()], -1).reshape(-1, 2)
    lam2 = (2 / (1 - pts.pow(2).sum(-1))) ** 2
    mass = (mix.log_prob(pts).exp() * lam2 * rr.reshape(-1)).sum() * (0.95 / nr) * (2 * math.pi / na)
    assert abs(float(mass) - 1) < 2e-3
    x = mix.sample(6000, generator=torch.Generator().manual_seed(3))
    assert float(x.norm(dim=-1).max()) < 1
    nearest = PoincareBall(2).dist(x[:, None, :].expand(-1, 6, -1), mix.means.expand(6000, -1, -1)).min(-1).values
    # d(x, nearest mean) <= ||w|| with w ~ N(0, 0.3^2 I_2): E||w|| = 0.3 sqrt(pi/2) = 0.376
    assert float(nearest.mean()) < 0.376 + 0.02
