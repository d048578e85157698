"""Alanine dipeptide in implicit solvent (AMBER ff96, OBC1): the shipped files, the (phi, psi) torsions and their
bias, the spec's basin boxes (§6.2), Delta F between basins from samples or from an FES on the torsion grid, and the
FES of (weighted) samples on such a grid (`dihedrals.fes_from_samples`, the generic torsions' own)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from flowlab.datasets import path
from flowlab.molecular.wt_asbs.analysis import delta_f_from_samples
from flowlab.molecular.wt_asbs.bias import BiasConfig, WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet, PeriodicCoordinateCV
from flowlab.molecular.wt_asbs.dihedrals import dihedral_bias, dihedral_cvs, fes_from_samples
from flowlab.molecular.wt_asbs.internal import InternalPotential, ZMatrix
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential

__all__ = [
    "ALDP_BASINS",
    "DATASET",
    "INPCRD",
    "PHI",
    "PRMTOP",
    "PSI",
    "aldp_files",
    "basin_df_from_fes",
    "basin_df_from_samples",
    "basins_visited",
    "cv_source_std",
    "fes_from_samples",
    "internal_system",
    "torsion_bias",
    "torsion_cvs",
]

#: the data set and its files (relative to the data set's folder)
DATASET = "alanine_dipeptide"
PRMTOP = "openmm_tests/alanine-dipeptide-implicit.prmtop"
INPCRD = "openmm_tests/alanine-dipeptide-implicit.inpcrd"
#: atom indices of the phi and psi torsions
PHI, PSI = (4, 6, 8, 14), (6, 8, 14, 16)
#: the Z-matrix root (CA, N, C): phi and psi are then coordinates
ROOT = (8, 6, 14)
#: (phi, psi) boxes in radians (spec §6.2).
ALDP_BASINS = {
    "C7eq": ((-2.5, -0.5), (0.3, 2.0)),
    "C7ax": ((0.5, 2.0), (-2.0, -0.3)),
    "aR": ((-2.5, -0.5), (-2.0, -0.3)),
    "aL": ((0.3, 1.5), (0.0, 1.5)),
}


def aldp_files(data_root: Path | str | None = None) -> tuple[Path, Path]:
    """(prmtop, inpcrd) of the `alanine_dipeptide` data set under `data_root` (default: `$FLOWLAB_DATA`);
    FileNotFoundError naming the missing file."""
    return path(DATASET, PRMTOP, data_root=data_root), path(DATASET, INPCRD, data_root=data_root)


def torsion_cvs() -> CVSet:
    """The CVs (phi, psi), radians."""
    return dihedral_cvs((PHI, PSI))


def torsion_bias(config: BiasConfig, kT: float) -> WellTemperedBias:
    """An empty periodic bias over (phi, psi) in [-pi, pi)^2 (energies in kJ/mol, `kT` likewise)."""
    return dihedral_bias(config, kT, 2)


def internal_system(
    potential: OpenMMPotential, x_ref: torch.Tensor, torsion_scale: float = 1.0
) -> tuple[InternalPotential, CVSet]:
    """The peptide on normalised internal coordinates (d = 60, the ASBS paper's setting): the potential on z around
    x_ref: (1, 66) nm, phi and psi scaled by `torsion_scale` rad per unit, every other coordinate by its Hessian
    width; and (phi, psi) read off z."""
    bonds = [(a.index, b.index) for a, b in potential.topology.bonds()]
    zmatrix = ZMatrix.from_bonds(bonds, potential.n_atoms, ROOT, (PHI, PSI))
    columns = [zmatrix.torsion_index(t) for t in (PHI, PSI)]
    pot = InternalPotential(potential, zmatrix, x_ref, overrides=dict.fromkeys(columns, torsion_scale))
    cvs = CVSet([PeriodicCoordinateCV(c, float(pot.scale[c]), float(pot.q_ref[c])) for c in columns])
    return pot, cvs


def cv_source_std(potential: InternalPotential, cvs: CVSet, std: float, along_cvs: float | None) -> torch.Tensor | None:
    """A source std per internal coordinate: `std` everywhere and `along_cvs` along the CVs' own columns, (d,); None
    (the one value `std`) when `along_cvs` is None."""
    if along_cvs is None:
        return None
    out = torch.full((potential.dim,), float(std))
    out[[cv.index for cv in cvs.cvs]] = along_cvs
    return out


def basin_df_from_samples(phi_psi: np.ndarray, weights: np.ndarray | None, kT: float) -> dict[str, float]:
    """Delta F (kJ/mol) of each basin relative to C7eq from (weighted) samples phi_psi: (N, 2), weights: (N,) or
    None; pseudo-count 0.5 for empty ones."""
    s = torch.as_tensor(phi_psi, dtype=torch.float64)
    w = None if weights is None else torch.as_tensor(weights, dtype=torch.float64)
    ref = ALDP_BASINS["C7eq"]
    return {
        f"dF_{k}": kT * delta_f_from_samples(s, ref, box, weights=w) for k, box in ALDP_BASINS.items() if k != "C7eq"
    }


def basin_df_from_fes(fes: np.ndarray, kT: float) -> dict[str, float]:
    """Delta F (kJ/mol) between basins from an FES on a (G, G) grid over [-pi, pi]^2 (OpenMM order: psi, phi)."""
    g = fes.shape[0]
    nodes = np.linspace(-math.pi, math.pi, g)
    f = torch.as_tensor(fes, dtype=torch.float64)  # OpenMM: fes[i_psi, i_phi]
    phi, psi = np.meshgrid(nodes, nodes)

    def logmass(box):
        (p0, p1), (q0, q1) = box
        mask = torch.as_tensor((phi >= p0) & (phi <= p1) & (psi >= q0) & (psi <= q1))
        return torch.logsumexp(-f[mask] / kT, 0)

    ref = logmass(ALDP_BASINS["C7eq"])
    return {f"dF_{k}": float(kT * (ref - logmass(box))) for k, box in ALDP_BASINS.items() if k != "C7eq"}


def basins_visited(phi_psi: np.ndarray) -> float:
    """How many of the basin boxes hold at least 3 of the samples phi_psi: (N, 2)."""
    return float(
        sum(
            (
                ((phi_psi[:, 0] >= p0) & (phi_psi[:, 0] <= p1) & (phi_psi[:, 1] >= q0) & (phi_psi[:, 1] <= q1)).sum()
                >= 3
                for (p0, p1), (q0, q1) in ALDP_BASINS.values()
            )
        )
    )
