"""The real chemistry stack the molecular package builds on works offline: RDKit and OpenMM."""

from __future__ import annotations

import pytest

from flowlab.molecular.wt_asbs.aldp import aldp_files


def test_rdkit_parses_valid_and_rejects_invalid_smiles():
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    mol = Chem.MolFromSmiles("CC(=O)Nc1ccc(O)cc1")  # paracetamol
    assert mol is not None and mol.GetNumHeavyAtoms() == 11
    assert Chem.MolFromSmiles("C1CC(") is None


@pytest.mark.parametrize(("solvent", "expected"), [(None, -88.089), ("OBC1", -138.970)])
def test_openmm_alanine_dipeptide_energy_matches_reference(solvent, expected, aldp_root):
    """Reference energies (kJ/mol) from the data set's README: ff96 at the shipped coordinates, NoCutoff."""
    import openmm
    from openmm import app, unit

    prmtop_file, inpcrd_file = aldp_files(aldp_root)
    prmtop = app.AmberPrmtopFile(str(prmtop_file))
    inpcrd = app.AmberInpcrdFile(str(inpcrd_file))
    implicit = getattr(app, solvent) if solvent else None
    system = prmtop.createSystem(nonbondedMethod=app.NoCutoff, implicitSolvent=implicit)
    integrator = openmm.VerletIntegrator(1.0 * unit.femtoseconds)
    platform = openmm.Platform.getPlatformByName("Reference")
    context = openmm.Context(system, integrator, platform)
    context.setPositions(inpcrd.positions)
    energy = context.getState(getEnergy=True).getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
    assert energy == pytest.approx(expected, abs=0.01)
