"""The SN2 system: the relaxed reactant complex and its mirror image, its affine internal coordinates and the PMF's
barrier and asymmetry."""

from __future__ import annotations

import pytest
import torch

from flowlab.molecular.wt_asbs import REACTANT, mirror, reaction_cv, sn2_potential
from flowlab.molecular.wt_asbs.sn2 import internal_system, mirror_internal, pmf_asymmetry, pmf_barrier


def test_sn2_reactant_is_relaxed_and_its_mirror_image_is_the_product():
    pot, cv = sn2_potential(workers=1), reaction_cv()
    out = pot.energy_and_forces(REACTANT)
    # relaxed: every force component is below 20 kJ/mol/nm, while moving one atom by 0.01 nm off the minimum
    # raises forces of ~1e3 kJ/mol/nm on the stiff C-H and C-Cl bonds
    assert float(out.forces.abs().max()) < 20.0
    kicked = REACTANT.clone()
    kicked[0, 9] += 0.01  # an H atom along x
    assert float(pot.energy_and_forces(kicked).forces.abs().max()) > 500.0
    both = torch.cat([REACTANT, mirror(REACTANT)])
    xi = cv(both).ravel()
    assert float(xi[0]) == pytest.approx(-0.1175, abs=1e-3) and float(xi[1]) == pytest.approx(-float(xi[0]), abs=1e-12)
    assert pot.energy_and_forces(both).energy[1].item() == pytest.approx(out.energy[0].item(), abs=1e-3)
    torch.testing.assert_close(mirror(mirror(both)), both)


def test_internal_system_puts_the_wells_on_the_line_and_the_mirror_on_sign_flips():
    """z_0 = -/+ reaction_units at the reactant / product complex with every other z = 0; the mirror is diagonal
    with -1 on z_0; equal energies at both complexes; xi read off z equals xi of the positions; with
    reaction_units None every coordinate, z_0 included, has unit curvature (in kT) at the wells."""
    pot = sn2_potential(workers=1)
    ip, cvs = internal_system(pot, reaction_units=2.0)
    z = ip.z(torch.cat([REACTANT, mirror(REACTANT)]))
    expect = torch.zeros(2, 12, dtype=torch.float64)
    expect[:, 0] = torch.tensor([-2.0, 2.0])
    torch.testing.assert_close(z, expect, atol=1e-9, rtol=0)
    m = torch.linalg.solve(ip.basis, mirror_internal(ip.basis.T).T)
    torch.testing.assert_close(m, torch.diag(m.diagonal()), atol=1e-9, rtol=0)
    assert m[0, 0].item() == pytest.approx(-1.0) and set(m.diagonal().round().tolist()) == {-1.0, 1.0}
    u = ip.energy_and_forces(z).energy
    assert u[0].item() == pytest.approx(u[1].item(), abs=1e-3)
    torch.testing.assert_close(cvs(z).ravel(), reaction_cv()(ip.cartesian(z)).ravel(), atol=1e-12, rtol=0)
    white, _ = internal_system(pot, reaction_units=None)
    h = 1e-3
    for k in (0, 7):  # the line, and one of the whitened coordinates (exact for the mirror-averaged Hessian's diagonal)
        zr = white.z(REACTANT).repeat(3, 1)
        zr[1, k] += h
        zr[2, k] -= h
        e = white.energy_and_forces(zr).energy / pot.kT
        assert ((e[1] + e[2] - 2 * e[0]) / h**2).item() == pytest.approx(1.0, rel=0.02)


def test_pmf_barrier_and_asymmetry_on_an_analytic_double_well():
    """F = a (xi^2 - c^2)^2 with nodes on xi = 0 and +-c: barrier a c^4 exactly, asymmetry 0; a tilt b xi adds an
    asymmetry of 2 |b xi| in RMS over the nodes kept."""
    nodes = torch.linspace(-0.2, 0.2, 81, dtype=torch.float64)
    a, c = 1e5, 0.12
    f = a * (nodes**2 - c**2) ** 2
    assert pmf_barrier(f, nodes) == pytest.approx(a * c**4, rel=1e-9)
    assert pmf_asymmetry(f, nodes, cutoff=1e9) == pytest.approx(0.0, abs=1e-9)
    tilted = f + 10.0 * nodes
    assert pmf_asymmetry(tilted, nodes, cutoff=1e9) == pytest.approx(float((20 * nodes).pow(2).mean().sqrt()))
    with pytest.raises(ValueError, match="symmetric"):
        pmf_asymmetry(f, nodes + 0.01, cutoff=1e9)
