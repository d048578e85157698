"""A molecule given by its files with dihedral CVs: the system (an AMBER .prmtop or a serialised OpenMM System
.xml), its starting positions (.inpcrd or .pdb), one or two torsions named by 0-based atom indices
(`dihedral:i,j,k,l` on the command line), their periodic bias over [-pi, pi)^K, the topology its samples are written
with and the FES of samples over two torsions. Alanine dipeptide (`aldp`) is this with its (phi, psi)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlab.molecular.wt_asbs.bias import BiasConfig, WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet, TorsionCV
from flowlab.molecular.wt_asbs.names import POSITION_SUFFIXES, SYSTEM_SUFFIXES
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential, read_pdb, read_prmtop

__all__ = [
    "DihedralSystem",
    "cv_name",
    "dihedral_bias",
    "dihedral_cvs",
    "dihedral_system",
    "fes_from_samples",
    "molecule_topology",
    "parse_cv",
]


def parse_cv(text: str) -> tuple[int, int, int, int]:
    """The atom indices (i, j, k, l) of a CV written `dihedral:i,j,k,l` (0-based, distinct); ValueError naming `cv`
    for another kind, another count, an index that is not a non-negative integer, or a repeated atom."""
    kind, sep, rest = str(text).partition(":")
    if not sep or kind.strip() != "dihedral":
        raise ValueError(f"cv: expected dihedral:i,j,k,l (0-based atom indices), got {text!r}")
    parts = [p.strip() for p in rest.split(",")]
    if len(parts) != 4:
        raise ValueError(f"cv: a dihedral takes 4 atom indices i,j,k,l, got {len(parts)} in {text!r}")
    if not all(p.isdigit() for p in parts):
        raise ValueError(f"cv: expected non-negative integer atom indices, got {text!r}")
    idx = tuple(int(p) for p in parts)
    if len(set(idx)) != 4:
        raise ValueError(f"cv: expected 4 distinct atoms, got a repeated atom in {text!r}")
    return idx  # type: ignore[return-value]


def cv_name(torsion: Sequence[int]) -> str:
    """The command line's name of a torsion: `dihedral:i,j,k,l`."""
    return "dihedral:" + ",".join(str(int(i)) for i in torsion)


def dihedral_cvs(torsions: Sequence[Sequence[int]], n_atoms: int | None = None) -> CVSet:
    """The CVs s: (B, K) radians in (-pi, pi] of K = 1 or 2 torsions (4 atom indices each), every index below
    `n_atoms` where given; ValueError naming `cv` otherwise."""
    if not 1 <= len(torsions) <= 2:
        raise ValueError(f"cv: expected one or two dihedrals (the bias grid's dimension), got {len(torsions)}")
    for t in torsions:
        try:
            name = cv_name(t)
        except (TypeError, ValueError) as err:
            raise ValueError(f"cv: expected 4 integer atom indices, got {t!r}") from err
        parse_cv(name)
        out = [i for i in t if n_atoms is not None and i >= n_atoms]
        if out:
            raise ValueError(f"cv: {name}: atom index {out[0]} is out of range for the system's {n_atoms} atoms")
    return CVSet([TorsionCV(t) for t in torsions])


def dihedral_bias(config: BiasConfig, kT: float, k: int = 2) -> WellTemperedBias:
    """An empty periodic bias over `k` torsions in [-pi, pi)^k (energies in kJ/mol, `kT` likewise)."""
    return config.build((-math.pi,) * k, (math.pi,) * k, kT=kT, periodic=True)


@dataclass(frozen=True)
class DihedralSystem:
    """A molecule ready for the sampler: its OpenMM `potential`, the starting `positions` (1, 3 A) nm float64 (the
    source's mean) and the torsion `cvs` (K of them)."""

    potential: OpenMMPotential
    positions: torch.Tensor
    cvs: CVSet


def _suffix(path: Path, suffixes: tuple[str, ...], name: str) -> None:
    if path.suffix not in suffixes:
        raise ValueError(f"{name}: expected a {'|'.join(suffixes)} file, got {path.name!r}")


def dihedral_system(
    system: str | Path,
    positions: str | Path,
    torsions: Sequence[Sequence[int]],
    *,
    solvent: str | None = None,
    workers: int = 1,
) -> DihedralSystem:
    """Read `system` (.prmtop, in implicit `solvent` or vacuum; .xml, a serialised OpenMM System with its own
    forces: `solvent` must be None) and `positions` (.inpcrd or .pdb of the same atoms; an XML system needs the
    .pdb, which holds the topology it lacks), and build the torsion CVs of `torsions` on them. ValueError or
    FileNotFoundError naming `system`, `positions` (or the reader's `prmtop`, `xml`, `inpcrd`, `pdb`) or `cv`."""
    system, positions = Path(system), Path(positions)
    _suffix(system, SYSTEM_SUFFIXES, "system")
    _suffix(positions, POSITION_SUFFIXES, "positions")
    if system.suffix == ".xml" and positions.suffix != ".pdb":
        raise ValueError(f"positions: an XML system has no topology: expected a .pdb file, got {positions.name!r}")
    pot = OpenMMPotential(system, solvent=solvent, workers=workers)
    cvs = dihedral_cvs(torsions, pot.n_atoms)
    return DihedralSystem(pot, pot.positions(positions), cvs)


def molecule_topology(system: str | Path, positions: str | Path):
    """The OpenMM `Topology` a molecule's samples are written with: the .pdb positions file's, else the .prmtop's;
    the readers' errors naming the file."""
    if Path(positions).suffix == ".pdb":
        return read_pdb(positions).topology
    return read_prmtop(system).topology


def fes_from_samples(s: torch.Tensor, weights: torch.Tensor | None, kT: float, bins: int = 36) -> np.ndarray:
    """The FES F = -kT ln p (kJ/mol, minimum 0) of samples of two torsions s: (N, 2) radians (phi, psi for
    alanine dipeptide) with weights (N,) or None, on a (bins, bins) histogram over [-pi, pi)^2 in OpenMM's order
    (fes[i_psi, i_phi]: the second CV along the rows; cells of width 2 pi / bins); NaN where no sample falls."""
    s = torch.remainder(s.to(torch.float64) + math.pi, 2 * math.pi)  # [0, 2 pi)
    cell = (s * (bins / (2 * math.pi))).long().clamp_(0, bins - 1)
    w = torch.ones(len(s), dtype=torch.float64) if weights is None else weights.to(torch.float64)
    p = torch.zeros(bins * bins, dtype=torch.float64).index_add_(0, cell[:, 1] * bins + cell[:, 0], w)
    f = -kT * torch.log(p / p.sum())
    return torch.where(p > 0, f - f.min(), math.nan).reshape(bins, bins).numpy()
