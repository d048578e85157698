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


def test_cached_wtmetad_reference_keeps_fes_snapshots_and_reads_its_convergence(aldp_root, tmp_path, monkeypatch):
    """The reference artifact's FES history: one snapshot per fes_every steps, the last equal to the final FES;
    built once (a second call reuses the entry); evals_to_match finds the first snapshot after which Delta F stays
    within a tolerance of its final value."""
    from flowlab.molecular.wt_asbs.aldp_reference import ReferenceConfig, aldp_reference
    from flowlab.molecular.wt_asbs.benchmarks.aldp_scores import evals_to_match
    from flowlab.molecular.wt_asbs.reference import openmm_wtmetad

    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path))
    cfg = ReferenceConfig(steps=1500, fes_every=500, frequency=100)
    ref = aldp_reference(cfg, aldp_root)
    assert ref.fes_history.shape == (3, 150, 150) and np.array_equal(ref.fes_history[-1], ref.fes)
    assert ref.energy_evals == 1500 and ref.cvs.shape == (15, 2)
    conv = ref.convergence(2.494)
    assert list(conv["steps"]) == [500, 1000, 1500] and set(conv) == {"steps", "dF_C7ax", "dF_aR", "dF_aL"}
    again = aldp_reference(cfg, aldp_root)
    assert np.array_equal(again.fes, ref.fes)
    assert evals_to_match(ref, 2.494, 0.0) == 1500.0  # only the final snapshot equals itself exactly
    assert evals_to_match(ref, 2.494, 1e9) == 500.0
    with pytest.raises(ValueError, match="fes_every"):
        openmm_wtmetad(*aldp_files(aldp_root), steps=1000, fes_every=150)
