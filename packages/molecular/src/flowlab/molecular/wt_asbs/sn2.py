"""The gas-phase identity SN2 reaction Cl_b- + CH3-Cl_a <-> Cl_b-CH3 + Cl_a- on GFN2-xTB (`tblite`).

Atoms (0..5): C, Cl_a, Cl_b, H, H, H; total charge -1. Reaction coordinate xi = d(C-Cl_a) - d(C-Cl_b) (nm): the
reactant complex (CH3-Cl_a ... Cl_b-) sits at xi = -0.117 nm, its mirror image, the product complex, at +0.117 nm,
and the D3h transition state at 0. The reaction is its own mirror image, so the exact free-energy difference between
the two wells is 0 and the exact PMF is even in xi: both are checks that need no reference run.

Flat-bottom walls on both C-Cl distances (0.35 nm) keep the chloride from leaving, so the PMF is defined on a bounded
range. This replaces the paper's UMA-based SN2 (gated weights); its numbers are not comparable with the paper's.
"""

from __future__ import annotations

import torch

from flowlab.molecular.wt_asbs.cvs import CVSet, DistanceDifferenceCV
from flowlab.molecular.wt_asbs.potentials import DistanceWalls, TBLitePotential

__all__ = [
    "CHARGE",
    "NUMBERS",
    "REACTANT",
    "WALL_NM",
    "WELLS",
    "mirror",
    "reaction_cv",
    "sn2_potential",
    "well_fractions",
]

NUMBERS = (6, 17, 17, 1, 1, 1)
CHARGE = -1
WALL_NM = 0.35
#: reaction-coordinate intervals (nm) of the reactant and product wells (minima at -/+ 0.117 nm)
WELLS = {"reactant": (-0.2, -0.05), "product": (0.05, 0.2)}

#: reactant ion-dipole complex (nm), relaxed with GFN2-xTB (L-BFGS, tblite 0.8): d(C-Cl_a) 0.1772, d(C-Cl_b) 0.2947
REACTANT = torch.tensor(
    [
        [0.0, 0.0, 0.0],
        [-0.1772, 0.0, 0.0],
        [0.2947, 0.0, 0.0],
        [0.0350, 0.1025, 0.0],
        [0.0350, -0.0513, 0.0888],
        [0.0350, -0.0513, -0.0888],
    ],
    dtype=torch.float64,
).reshape(1, -1)


def sn2_potential(*, temperature: float = 300.0, workers: int = 1) -> DistanceWalls:
    """GFN2-xTB energy of the complex plus the two C-Cl walls (kJ/mol, nm); x: (B, 18)."""
    base = TBLitePotential(NUMBERS, charge=CHARGE, temperature=temperature, workers=workers)
    return DistanceWalls(base, ((0, 1, WALL_NM), (0, 2, WALL_NM)))


def reaction_cv() -> CVSet:
    """xi = d(C-Cl_a) - d(C-Cl_b) (nm) as a one-CV set."""
    return CVSet([DistanceDifferenceCV((0, 1), (0, 2))])


def mirror(x: torch.Tensor) -> torch.Tensor:
    """The mirror image of configurations x: (B, 18) under x -> -x with the two chlorines swapped: xi -> -xi, same
    energy. An involution that maps the reactant complex onto the product complex and back."""
    atoms = -x.reshape(len(x), -1, 3).clone()
    atoms[:, [1, 2]] = atoms[:, [2, 1]]
    return atoms.reshape(x.shape)


def well_fractions(xi: torch.Tensor, weights: torch.Tensor | None = None) -> dict[str, float]:
    """Share of the (weighted) samples in each of `WELLS`. xi: (N,) reaction coordinates; weights: (N,) or None."""
    w = torch.ones_like(xi) if weights is None else weights.to(xi)
    return {k: float(w[(xi >= lo) & (xi <= hi)].sum() / w.sum()) for k, (lo, hi) in WELLS.items()}
