"""The SN2 system: the relaxed reactant complex and its mirror image."""

from __future__ import annotations

import pytest
import torch

from flowlab.molecular.wt_asbs import REACTANT, mirror, reaction_cv, sn2_potential


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
