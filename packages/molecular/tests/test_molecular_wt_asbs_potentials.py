"""WT-ASBS energy engines: the analytic toys, OpenMM (alanine dipeptide), GFN2-xTB (tblite), distance walls and the
unit constants."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlab.molecular.wt_asbs import (
    BOHR_NM,
    EV_TO_KJMOL,
    HARTREE_TO_KJMOL,
    REACTANT,
    DistanceWalls,
    EmbeddedToy,
    EnergyForces,
    FourWell,
    MuellerBrown,
    OpenMMPotential,
    TBLitePotential,
    TorsionCV,
    kT_kjmol,
    pmf_quadrature,
)
from flowlab.molecular.wt_asbs.aldp import PHI, PSI, aldp_files
from flowlab.molecular.wt_asbs.sn2 import NUMBERS as NUMBERS_SN2


def test_units_hill_height_in_kjmol():
    assert pytest.approx(0.04824, abs=1e-5) == 0.0005 * EV_TO_KJMOL
    assert kT_kjmol(300.0) == pytest.approx(2.494, abs=1e-3)


def test_unit_constants_are_codata():
    from scipy import constants as c

    assert pytest.approx(c.physical_constants["Hartree energy"][0] * c.N_A / 1000, rel=1e-9) == HARTREE_TO_KJMOL
    assert pytest.approx(c.physical_constants["Bohr radius"][0] * 1e9, rel=1e-9) == BOHR_NM


@pytest.mark.parametrize(
    "pot", [MuellerBrown(), FourWell(), EmbeddedToy(FourWell(), 3)], ids=lambda pot: type(pot).__name__
)
def test_toy_forces_are_minus_the_energy_gradient(pot, fd_grad):
    x = torch.randn(4, pot.dim, generator=torch.Generator().manual_seed(9), dtype=torch.float64) * 0.5
    out = pot.energy_and_forces(x)
    torch.testing.assert_close(out.forces, -fd_grad(pot.energy, x), atol=1e-5, rtol=1e-5)
    assert pot.n_evals == 4


def test_embedding_leaves_the_pmf_unchanged_and_bad_input_raises():
    centres = torch.linspace(-2, 2, 41, dtype=torch.float64)
    emb = EmbeddedToy(FourWell(), 2)
    torch.testing.assert_close(
        pmf_quadrature(FourWell().energy, FourWell.box, centres),
        pmf_quadrature(
            lambda z: emb.energy(torch.cat([z, torch.zeros(len(z), 2, dtype=z.dtype)], 1)), FourWell.box, centres
        ),
    )
    with pytest.raises(ValueError, match="x"):
        FourWell().energy_and_forces(torch.tensor([[float("nan"), 0.0]]))
    with pytest.raises(ValueError, match="x"):
        FourWell().energy_and_forces(torch.zeros(3, 4))


@pytest.mark.parametrize(("solvent", "expected"), [(None, -88.089), ("OBC1", -138.970)])
def test_openmm_potential_reproduces_reference_energy_and_forces(solvent, expected, aldp_root):
    prmtop, inpcrd = aldp_files(aldp_root)
    pot = OpenMMPotential(prmtop, solvent=solvent, workers=2)
    x = pot.positions(inpcrd)
    out = pot.energy_and_forces(x.repeat(2, 1))
    assert float(out.energy[0]) == pytest.approx(expected, abs=0.01)
    assert float(out.energy[1]) == pytest.approx(expected, abs=0.01)
    g = torch.Generator().manual_seed(11)
    d = torch.randn(1, pot.dim, generator=g, dtype=torch.float64)
    d = d / d.norm()
    h = 1e-5
    fd = (pot.energy_and_forces(x + h * d).energy - pot.energy_and_forces(x - h * d).energy) / (2 * h)
    assert float(-(out.forces[:1] * d).sum()) == pytest.approx(float(fd), rel=1e-3)


def test_shipped_structure_is_extended_and_torsions_match_numpy(aldp_root, numpy_dihedral):
    prmtop, inpcrd = aldp_files(aldp_root)
    pot = OpenMMPotential(prmtop)
    x = pot.positions(inpcrd)
    a = x.view(-1, 3).numpy()
    for idx in (PHI, PSI):
        ours = math.degrees(float(TorsionCV(idx)(x)))
        assert ours == pytest.approx(numpy_dihedral(*a[list(idx)]), abs=0.01)
        assert abs(abs(ours) - 180.0) < 1.0  # extended structure


def test_openmm_errors_are_clear(tmp_path, aldp_root):
    prmtop, inpcrd = aldp_files(aldp_root)
    with pytest.raises(FileNotFoundError, match="prmtop"):
        OpenMMPotential(tmp_path / "missing.prmtop")
    bad = tmp_path / "bad.prmtop"
    bad.write_text("this is not a prmtop\n")
    with pytest.raises(ValueError, match="prmtop"):
        OpenMMPotential(bad)
    pot = OpenMMPotential(prmtop)
    with pytest.raises(ValueError, match="atoms"):
        pot.energy_and_forces(torch.zeros(2, 3 * 21, dtype=torch.float64))
    x = pot.positions(inpcrd).clone()
    x[0, 5] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        pot.energy_and_forces(x)
    with pytest.raises(FileNotFoundError, match="inpcrd"):
        pot.positions(tmp_path / "missing.inpcrd")
    wrong = tmp_path / "wrong.inpcrd"
    wrong.write_text("title\n    1\n   0.0000000   0.0000000   0.0000000\n")
    with pytest.raises(ValueError, match="inpcrd"):
        pot.positions(wrong)


def test_tblite_forces_are_minus_the_energy_gradient_and_match_tblite_in_its_units():
    pot = TBLitePotential(NUMBERS_SN2, charge=-1, workers=2)
    x = REACTANT + 0.003 * torch.randn(2, 18, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out = pot.energy_and_forces(x)
    assert pot.n_evals == 2 and pot.n_failed == 0 and pot.n_retried == 0
    # central differences (eps = 1e-4 nm) on a few coordinates; forces are O(100) kJ/mol/nm here
    for j in (0, 4, 8, 13):
        e = torch.zeros_like(x)
        e[:, j] = 1e-4
        fd = (pot.energy_and_forces(x + e).energy - pot.energy_and_forces(x - e).energy) / 2e-4
        torch.testing.assert_close(out.forces[:, j], -fd, rtol=1e-3, atol=0.5)
    # the same structure in Bohr and Hartree straight from tblite (its gradient is dE/dx in Hartree/Bohr)
    from tblite.interface import Calculator

    calc = Calculator("GFN2-xTB", np.array(NUMBERS_SN2), REACTANT.reshape(6, 3).numpy() / 0.0529177210903, charge=-1)
    calc.set("verbosity", 0)
    res = calc.singlepoint()
    ours = pot.energy_and_forces(REACTANT)
    assert float(ours.energy[0]) == pytest.approx(res.get("energy") * 2625.499639, abs=1e-3)
    torch.testing.assert_close(
        ours.forces[0], torch.as_tensor(-res.get("gradient").ravel() * 2625.499639 / 0.0529177210903), atol=1e-2, rtol=0
    )


class _Zero:
    """E = 0 for n atoms (to isolate the walls)."""

    kT, n_evals = 1.0, 0

    def __init__(self, n: int) -> None:
        self.dim = 3 * n

    def energy_and_forces(self, x):
        return EnergyForces(torch.zeros(len(x), dtype=x.dtype), torch.zeros_like(x))


def test_distance_walls_are_flat_inside_and_harmonic_outside():
    walls = DistanceWalls(_Zero(6), ((0, 2, 0.35),), k=1000.0)
    x = torch.zeros(3, 18, dtype=torch.float64)
    x[:, 6] = torch.tensor([0.30, 0.40, 0.50], dtype=torch.float64)  # atom 2 on the x axis
    out = walls.energy_and_forces(x)
    torch.testing.assert_close(
        out.energy, torch.tensor([0.0, 0.5 * 1000 * 0.05**2, 0.5 * 1000 * 0.15**2], dtype=torch.float64)
    )
    torch.testing.assert_close(out.forces[:, 6], torch.tensor([0.0, -1000 * 0.05, -1000 * 0.15], dtype=torch.float64))
    torch.testing.assert_close(out.forces[:, 0], -out.forces[:, 6])
    with pytest.raises(ValueError, match="walls"):
        DistanceWalls(_Zero(6), ((0, 6, 0.3),))


def test_tblite_errors_are_clear():
    with pytest.raises(ValueError, match="numbers"):
        TBLitePotential([6, 0, 1])
    with pytest.raises(ValueError, match="method"):
        TBLitePotential([1, 1], method="GFN3")
    with pytest.raises(ValueError, match="uhf"):
        TBLitePotential(NUMBERS_SN2, charge=-1, uhf=1)  # 44 electrons cannot hold one unpaired electron
    with pytest.raises(ValueError, match="charge"):
        TBLitePotential(NUMBERS_SN2, charge=-0.5)
    pot = TBLitePotential(NUMBERS_SN2, charge=-1)
    with pytest.raises(ValueError, match="5 atoms given"):
        pot.energy_and_forces(torch.zeros(1, 15))
    bad = REACTANT.clone()
    bad[0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        pot.energy_and_forces(bad)


def test_tblite_gives_nan_for_a_geometry_it_cannot_solve_and_counts_it():
    """Two hydrogens on top of each other (tblite refuses the geometry): NaN energy and forces, counted in
    n_failed (not in n_retried), while the other configuration of the batch gets its energy."""
    pot = TBLitePotential(NUMBERS_SN2, charge=-1)
    bad = REACTANT.clone()
    bad[0, 12:15] = bad[0, 9:12]  # atom 4 onto atom 3
    out = pot.energy_and_forces(torch.cat([REACTANT, bad]))
    assert math.isfinite(float(out.energy[0])) and bool(torch.isfinite(out.forces[0]).all())
    assert math.isnan(float(out.energy[1])) and bool(torch.isnan(out.forces[1]).all())
    assert pot.n_failed == 1 and pot.n_retried == 0 and pot.n_evals == 2  # refused, not retried
