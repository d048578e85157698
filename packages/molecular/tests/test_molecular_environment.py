"""The real chemistry stack the molecular package builds on works offline: RDKit and OpenMM."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
ALDP = DATA / "alanine_dipeptide" / "openmm_tests"


def test_rdkit_parses_valid_and_rejects_invalid_smiles():
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles("CC(=O)Nc1ccc(O)cc1")  # paracetamol
    assert mol is not None and mol.GetNumHeavyAtoms() == 11
    assert Chem.MolFromSmiles("C1CC(") is None


@pytest.mark.skipif(not ALDP.is_dir(), reason=f"alanine_dipeptide data set not found under FLOWLAB_DATA={DATA}")
@pytest.mark.parametrize(("solvent", "expected"), [(None, -88.089), ("OBC1", -138.970)])
def test_openmm_alanine_dipeptide_energy_matches_reference(solvent, expected):
    """Reference energies (kJ/mol) from the data set's README: ff96 at the shipped coordinates, NoCutoff."""
    import openmm
    from openmm import app, unit

    prmtop = app.AmberPrmtopFile(str(ALDP / "alanine-dipeptide-implicit.prmtop"))
    inpcrd = app.AmberInpcrdFile(str(ALDP / "alanine-dipeptide-implicit.inpcrd"))
    implicit = getattr(app, solvent) if solvent else None
    system = prmtop.createSystem(nonbondedMethod=app.NoCutoff, implicitSolvent=implicit)
    integrator = openmm.VerletIntegrator(1.0 * unit.femtoseconds)
    platform = openmm.Platform.getPlatformByName("Reference")
    context = openmm.Context(system, integrator, platform)
    context.setPositions(inpcrd.positions)
    energy = context.getState(getEnergy=True).getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    assert energy == pytest.approx(expected, abs=0.01)
