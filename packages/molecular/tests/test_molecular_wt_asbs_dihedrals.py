"""A user's own molecule: `flowlab molecular sample --system FILE --positions FILE --cv dihedral:i,j,k,l`, with alanine
dipeptide's shipped files standing in for the user's, checked against the package's own (phi, psi); and the same
system read as a serialised OpenMM XML beside a PDB."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from openmm import XmlSerializer, app, unit
from typer.testing import CliRunner

from flowlab.molecular.cli import app as cli
from flowlab.molecular.wt_asbs.aldp import DATASET, PHI, PSI, aldp_files, torsion_cvs
from flowlab.molecular.wt_asbs.asbs import ASBSConfig
from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP
from flowlab.molecular.wt_asbs.dihedrals import dihedral_system, molecule_topology, parse_cv
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential

TINY = ASBSConfig(stages="AC", adjoint_epochs=2, corrector_epochs=1, steps_per_epoch=2, sde_steps=10,
                  skip_epochs=0, new_samples=32)  # fmt: skip
CVS = ("dihedral:4,6,8,14", "dihedral:6,8,14,16")


def _invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def test_user_prmtop_run_records_the_package_torsions_and_exports(tmp_path, monkeypatch, aldp_root):
    assert [parse_cv(c) for c in CVS] == [PHI, PSI]  # the package's own aldp (phi, psi)
    quick = ALDP.variants["quick"]
    monkeypatch.setitem(ALDP.variants, "quick", replace(quick, sampler=replace(quick.sampler, asbs=TINY)))
    prmtop, inpcrd = aldp_files(aldp_root)
    run = tmp_path / "run"
    args = ["--system", str(prmtop), "--positions", str(inpcrd), "--cv", CVS[0], "--cv", CVS[1]]
    _invoke("sample", *args, "--n", "12", "--out", str(run))
    config = json.loads((run / "config.json").read_text())
    assert config["system"] == "user" and config["cvs"] == list(CVS) and config["energy_evals"] > 0
    data = torch.load(run / "samples.pt", weights_only=True)
    assert data["x"].shape == (12, 66) and data["cvs"].shape == (12, 2)
    torch.testing.assert_close(data["cvs"], torsion_cvs()(data["x"].double()), rtol=0, atol=1e-12)
    assert bool((data["cvs"].abs() <= math.pi).all())
    report = json.loads(_invoke("evaluate", str(run), "--plot", str(tmp_path / "fes.png")).strip().splitlines()[-1])
    assert report["system"] == "user" and report["cvs"] == list(CVS) and report["weights"] == "bias"
    assert 0 < report["ess_frac"] <= 1 and (tmp_path / "fes.png").read_bytes()[:4] == b"\x89PNG"
    assert "12 frames of 22 atoms" in _invoke("export", str(run), "--out", str(tmp_path / "user.pdb"))
    pdb = app.PDBFile(str(tmp_path / "user.pdb"))
    assert pdb.topology.getNumAtoms() == 22 and pdb.getNumFrames() == 12
    got = pdb.getPositions(asNumpy=True, frame=11).value_in_unit(unit.nanometer)
    np.testing.assert_allclose(got, data["x"][11].double().reshape(22, 3).numpy(), rtol=0, atol=0.0005 / 10 + 1e-7)
    one = tmp_path / "one"  # a single CV: a 1-D bias; no FES to draw
    _invoke("sample", *args[:6], "--n", "4", "--bias", "off", "--out", str(one))
    assert torch.load(one / "samples.pt", weights_only=True)["cvs"].shape == (4, 1)
    res = CliRunner().invoke(cli, ["evaluate", str(one), "--plot", str(tmp_path / "one.png")])
    assert res.exit_code == 2 and "--plot" in res.output


def test_xml_system_beside_a_pdb_is_the_prmtop_system(tmp_path, aldp_root):
    prmtop, _ = aldp_files(aldp_root)
    pdb = aldp_root / DATASET / "openmm_tests" / "alanine-dipeptide-implicit.pdb"
    system = app.AmberPrmtopFile(str(prmtop)).createSystem(
        nonbondedMethod=app.NoCutoff, constraints=None, implicitSolvent=app.OBC1
    )
    xml = tmp_path / "system.xml"
    xml.write_text(XmlSerializer.serialize(system))
    mol = dihedral_system(xml, pdb, [PHI, PSI])
    ref = OpenMMPotential(prmtop, solvent="OBC1")
    x = ref.positions(pdb)
    torch.testing.assert_close(mol.positions, x)
    torch.testing.assert_close(mol.potential.energy_and_forces(x).energy, ref.energy_and_forces(x).energy)
    torch.testing.assert_close(mol.cvs(x), torsion_cvs()(x))
    top = molecule_topology(xml, pdb)
    assert top.getNumAtoms() == 22 and [r.name for r in top.residues()] == ["ACE", "ALA", "NME"]
    with pytest.raises(ValueError, match=r"^positions: an XML system"):
        dihedral_system(xml, tmp_path / "x.inpcrd", [PHI])
    with pytest.raises(ValueError, match=r"^cv: dihedral:4,6,8,22: atom index 22"):
        dihedral_system(xml, pdb, [(4, 6, 8, 22)])
