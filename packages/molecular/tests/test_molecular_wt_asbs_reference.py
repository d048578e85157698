"""The references: overdamped Langevin and OpenMM MD."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.molecular.wt_asbs import EnergyForces, FourWell, langevin
from flowlab.molecular.wt_asbs.aldp import aldp_files


def test_langevin_steps_over_a_failed_energy_evaluation():
    class _Failing(FourWell):
        def energy_and_forces(self, x):
            out = super().energy_and_forces(x)
            return EnergyForces(out.energy, torch.full_like(out.forces, float("nan")))

    gen = torch.Generator().manual_seed(0)
    res = langevin(_Failing(), torch.zeros(4, 2), steps=10, dt=1e-3, generator=gen, record_every=5)
    assert res.samples.shape == (8, 2) and bool(torch.isfinite(res.samples).all())


@pytest.mark.parametrize("seed", [0, 7])
def test_openmm_md_reproduces_with_the_same_seed(seed, aldp_root):
    """Seed 0 included: OpenMM reads a raw 0 as "choose a fresh seed", which made the reference rows irreproducible."""
    from flowlab.molecular.wt_asbs.reference import openmm_md

    prmtop, inpcrd = aldp_files(aldp_root)
    runs = [openmm_md(prmtop, inpcrd, steps=200, solvent="OBC1", seed=seed, record_every=100) for _ in range(2)]
    assert np.array_equal(runs[0].cvs, runs[1].cvs)
