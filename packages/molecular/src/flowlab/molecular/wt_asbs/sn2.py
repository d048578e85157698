"""The gas-phase identity SN2 reaction Cl_b- + CH3-Cl_a <-> Cl_b-CH3 + Cl_a- on GFN2-xTB (`tblite`).

Atoms (0..5): C, Cl_a, Cl_b, H, H, H; total charge -1. Reaction coordinate xi = d(C-Cl_a) - d(C-Cl_b) (nm): the
reactant complex (CH3-Cl_a ... Cl_b-) sits at xi = -0.117 nm, its mirror image, the product complex, at +0.117 nm,
and the D3h transition state at 0. The reaction is its own mirror image, so the exact free-energy difference between
the two wells is 0 and the exact PMF is even in xi: both are checks that need no reference run.

Flat-bottom walls on both C-Cl distances (0.35 nm) keep the chloride from leaving, so the PMF is defined on a bounded
range. `internal_system` puts the complex on 12 affine internal coordinates: the first runs along the straight line
from the reactant to the product complex in the Cl...C...Cl axis frame (its midpoint a D3h-like geometry), the other
eleven whiten the wells' Hessian in its orthogonal complement, and the mirror is a sign flip of single
coordinates. This replaces the paper's UMA-based SN2 (gated weights); its numbers are not comparable with the paper's.
"""

from __future__ import annotations

import numpy as np
import torch

from flowlab.molecular.wt_asbs.axis_frame import AxisFrame
from flowlab.molecular.wt_asbs.cvs import CVSet, DistanceDifferenceCV, MappedCV
from flowlab.molecular.wt_asbs.internal import AffineInternalPotential, internal_hessian
from flowlab.molecular.wt_asbs.potentials import DistanceWalls, TBLitePotential

__all__ = [
    "CHARGE",
    "FRAME",
    "NUMBERS",
    "REACTANT",
    "WALL_NM",
    "WELLS",
    "internal_source",
    "internal_system",
    "mirror",
    "mirror_internal",
    "pmf_asymmetry",
    "pmf_barrier",
    "reaction_cv",
    "sn2_potential",
    "well_fractions",
]

NUMBERS = (6, 17, 17, 1, 1, 1)
CHARGE = -1
WALL_NM = 0.35
#: reaction-coordinate intervals (nm) of the reactant and product wells (minima at -/+ 0.117 nm)
WELLS = {"reactant": (-0.2, -0.05), "product": (0.05, 0.2)}

#: the body frame: C at the origin, z from Cl_a to Cl_b, the first H in the xz plane
FRAME = AxisFrame(origin=0, axis=(1, 2), plane=3, n_atoms=6)

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


def sn2_potential(
    *, temperature: float = 300.0, workers: int = 1, wall_nm: float = WALL_NM, wall_k: float = 5000.0
) -> DistanceWalls:
    """GFN2-xTB energy of the complex plus the two C-Cl walls 0.5 wall_k (d - wall_nm)^2 beyond wall_nm (kJ/mol,
    nm); x: (B, 18)."""
    base = TBLitePotential(NUMBERS, charge=CHARGE, temperature=temperature, workers=workers)
    return DistanceWalls(base, ((0, 1, wall_nm), (0, 2, wall_nm)), k=wall_k)


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


def mirror_internal(q: torch.Tensor) -> torch.Tensor:
    """`mirror` on `FRAME`'s coordinates q: (B, 12), a signed permutation: z -> -z in the body frame with the
    chlorines swapped (z_a, z_b) -> (-z_b, -z_a)."""
    out = q.clone()
    out[:, 2], out[:, 3] = -q[:, 3], -q[:, 2]
    out[:, [5, 8, 11]] = -q[:, [5, 8, 11]]
    return out


def internal_system(
    potential: DistanceWalls, *, reaction_units: float | None = 2.0
) -> tuple[AffineInternalPotential, CVSet]:
    """The complex on affine internal coordinates z: (B, 12) with the saddle-side midpoint of the two complexes at
    0, and xi read off z.

    z_0 runs along the straight line from the reactant (z_0 = -reaction_units) to the product complex (+); None
    scales it to the reactant well's harmonic width instead. z_1..z_11 whiten the Hessian of U (24 energy calls at
    the reactant; the product's is its mirror image), averaged over the two wells and projected off the line, so that
    every z_k alone has unit curvature (in kT) at either well and the mirror only flips signs of single coordinates."""
    q_r = FRAME.to_internal(REACTANT)[0]
    q_p = mirror_internal(q_r[None])[0]
    h = internal_hessian(potential, FRAME, q_r)
    h = (h + mirror_internal(mirror_internal(h).T).T) / 2
    v = (q_p - q_r) / 2
    u = v / v.norm()
    complement = torch.linalg.eigh(torch.eye(len(v), dtype=v.dtype) - torch.outer(u, u))[1][:, 1:]  # v's complement
    lam, rot = torch.linalg.eigh(complement.T @ h @ complement)
    if not bool((lam > 0).all()):
        raise ValueError("potential: the reactant complex is not a minimum off the reaction line")
    whiten = complement @ rot * (potential.kT / lam).sqrt()
    units = float((v @ h @ v / potential.kT).sqrt()) if reaction_units is None else reaction_units
    basis = torch.cat([(v / units)[:, None], whiten], 1)
    pot = AffineInternalPotential(potential, FRAME, (q_r + q_p) / 2, basis)
    return pot, CVSet([MappedCV(DistanceDifferenceCV((0, 1), (0, 2)), pot.cartesian)])


def internal_source(
    potential: AffineInternalPotential, std: float, along_line: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sampler's Gaussian source on `internal_system`'s z: mean at the reactant complex, (d,), and std (d,):
    `along_line` on the reaction line z_0, `std` elsewhere."""
    out = torch.full((potential.dim,), float(std))
    out[0] = along_line
    return potential.z(REACTANT)[0].float(), out


def pmf_barrier(f: torch.Tensor, nodes: torch.Tensor) -> float:
    """The barrier F(0) - min of F over the reactant well (F's units) of a PMF f on xi nodes: (G,) (F(0) linearly
    interpolated)."""
    well = f[(nodes >= WELLS["reactant"][0]) & (nodes <= WELLS["reactant"][1])].min()
    return float(np.interp(0.0, nodes.numpy(), f.numpy()) - well)


def pmf_asymmetry(f: torch.Tensor, nodes: torch.Tensor, *, cutoff: float) -> float:
    """RMSE between F(xi) and F(-xi) on the nodes where both are <= cutoff (F's units; the exact PMF gives 0).
    f, nodes: (G,), nodes symmetric about 0."""
    if not torch.allclose(nodes, -nodes.flip(0), atol=1e-9):
        raise ValueError("nodes: expected a grid symmetric about 0")
    keep = (f <= cutoff) & (f.flip(0) <= cutoff)
    return float(((f - f.flip(0))[keep] ** 2).mean().sqrt())
