"""`flowlab molecular export`: a run's samples as PDB, DCD and XYZ trajectories that read back, through OpenMM and
an independent DCD reader, with the system's atoms and the samples' coordinates to the written precision."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from openmm import app, unit
from typer.testing import CliRunner

from flowlab.molecular.cli import app as cli
from flowlab.molecular.wt_asbs.asbs import ASBSConfig
from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP
from flowlab.molecular.wt_asbs.sn2 import NUMBERS, REACTANT
from flowlab.molecular.wt_asbs.trajectories import element_topology, write_trajectory

TINY = ASBSConfig(stages="AC", adjoint_epochs=2, corrector_epochs=1, steps_per_epoch=2, sde_steps=10,
                  skip_epochs=0, new_samples=32)  # fmt: skip


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def _read_dcd(path: Path) -> np.ndarray:
    """The frames (F, A, 3) Å of a DCD without a unit cell, read as its Fortran records: the CORD header (frame
    count, box flag), the title, the atom count, then x, y and z records per frame."""
    data, records, i = path.read_bytes(), [], 0
    while i < len(data):
        (size,) = struct.unpack_from("<i", data, i)
        assert struct.unpack_from("<i", data, i + 4 + size) == (size,), "record markers differ"
        records.append(data[i + 4 : i + 4 + size])
        i += 8 + size
    header, _, atoms, *coords = records
    assert header[:4] == b"CORD" and struct.unpack_from("<i", header, 4 + 4 * 10) == (0,)  # no unit cell
    (frames,), (n,) = struct.unpack_from("<i", header, 4), struct.unpack("<i", atoms)
    assert len(coords) == 3 * frames and all(len(c) == 4 * n for c in coords)
    xyz = np.stack([np.frombuffer(c, dtype="<f4") for c in coords]).reshape(frames, 3, n)
    return xyz.transpose(0, 2, 1).astype(np.float64)


def _read_xyz(path: Path) -> tuple[list[list[str]], np.ndarray]:
    """(symbols per frame, coordinates (F, A, 3)) of a plain XYZ file."""
    lines, symbols, coords = path.read_text().splitlines(), [], []
    while lines:
        n = int(lines[0])
        atoms = [line.split() for line in lines[2 : 2 + n]]
        symbols.append([a[0] for a in atoms])
        coords.append([[float(v) for v in a[1:]] for a in atoms])
        lines = lines[2 + n :]
    return symbols, np.asarray(coords)


def test_aldp_run_exports_pdb_dcd_and_xyz_that_read_back(tmp_path, monkeypatch, aldp_root):
    quick = ALDP.variants["quick"]
    monkeypatch.setitem(ALDP.variants, "quick", replace(quick, sampler=replace(quick.sampler, asbs=TINY)))
    run = tmp_path / "run"
    _invoke("sample", "--system", "aldp", "--n", "12", "--out", str(run), "--data-root", str(aldp_root))
    x = torch.load(run / "samples.pt", weights_only=True)["x"].double().reshape(12, 22, 3).numpy()  # nm
    for ext in ("pdb", "dcd", "xyz"):
        out = _invoke("export", str(run), "--out", str(tmp_path / f"aldp.{ext}"), "--data-root", str(aldp_root))
        assert "12 frames of 22 atoms" in out
    pdb = app.PDBFile(str(tmp_path / "aldp.pdb"))
    assert pdb.topology.getNumAtoms() == 22 and pdb.getNumFrames() == 12
    assert [r.name for r in pdb.topology.residues()] == ["ACE", "ALA", "NME"]
    got = np.stack([pdb.getPositions(asNumpy=True, frame=i).value_in_unit(unit.nanometer) for i in range(12)])
    np.testing.assert_allclose(got, x, rtol=0, atol=0.0005 / 10 + 1e-9)  # 3 decimals in Å
    np.testing.assert_allclose(_read_dcd(tmp_path / "aldp.dcd"), 10 * x, rtol=1e-6, atol=1e-6)  # float32 Å
    symbols, coords = _read_xyz(tmp_path / "aldp.xyz")
    assert symbols == [[a.element.symbol for a in pdb.topology.atoms()]] * 12
    np.testing.assert_allclose(coords, 10 * x, rtol=0, atol=5e-7 + 1e-9)  # 6 decimals in Å


def _fake_run(folder: Path, system: str, x: torch.Tensor) -> Path:
    """A run folder in `sample`'s format holding the samples x (its CVs and bias zeros)."""
    folder.mkdir()
    config = {"method": "asbs", "system": system, "kT": 1.0, "energy_evals": 0}
    (folder / "config.json").write_text(json.dumps(config))
    zeros = torch.zeros(len(x), dtype=torch.float64)
    torch.save({"x": x, "cvs": zeros[:, None], "bias": zeros}, folder / "samples.pt")
    return folder


def test_sn2_samples_open_in_openmm_with_their_elements(tmp_path):
    x = REACTANT.float() + 0.01 * torch.randn(3, 18, generator=torch.Generator().manual_seed(0))
    run = _fake_run(tmp_path / "sn2", "sn2", x)
    _invoke("export", str(run), "--out", str(tmp_path / "sn2.pdb"))
    pdb = app.PDBFile(str(tmp_path / "sn2.pdb"))
    assert [a.element.symbol for a in pdb.topology.atoms()] == ["C", "Cl", "Cl", "H", "H", "H"]
    got = np.stack([pdb.getPositions(asNumpy=True, frame=i).value_in_unit(unit.nanometer) for i in range(3)])
    np.testing.assert_allclose(got, x.double().reshape(3, 6, 3).numpy(), rtol=0, atol=0.0005 / 10 + 1e-9)


def test_toy_samples_are_xyz_pseudo_atoms_zero_padded(tmp_path):
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    run = _fake_run(tmp_path / "toy", "four-well-5d", x)
    _invoke("export", str(run), "--out", str(tmp_path / "toy.xyz"))
    symbols, coords = _read_xyz(tmp_path / "toy.xyz")
    assert symbols == [["X", "X"]] * 4
    np.testing.assert_allclose(coords.reshape(4, 6)[:, :5], x.numpy(), rtol=0, atol=5e-7 + 1e-12)
    assert (coords.reshape(4, 6)[:, 5] == 0).all()


def test_write_trajectory_names_what_is_wrong(tmp_path):
    x = torch.zeros(2, 6)
    with pytest.raises(ValueError, match=r"^path: .*'a\.mol2'"):
        write_trajectory(x, tmp_path / "a.mol2")
    with pytest.raises(ValueError, match=r"^path: \.pdb needs a molecule's topology"):
        write_trajectory(x, tmp_path / "a.pdb")
    with pytest.raises(ValueError, match=r"^x: expected shape \(N, 18\)"):
        write_trajectory(x, tmp_path / "a.dcd", topology=element_topology(NUMBERS, "SN2"))
    with pytest.raises(ValueError, match=r"^x: contains NaN"):
        write_trajectory(torch.full((2, 6), math.nan), tmp_path / "a.xyz")
    assert not list(tmp_path.iterdir())
