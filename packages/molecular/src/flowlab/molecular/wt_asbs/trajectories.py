"""Sample sets as trajectory files, the writer chosen by the file's extension (`TRAJECTORY_SUFFIXES`): a multi-model
PDB and a CHARMM-style DCD through OpenMM's own writers (`PDBFile.writeModel`, `DCDFile`) on the system's topology,
or plain XYZ frames (element symbols, coordinates in Ångström) for any system.

Samples are flat, x: (N, 3 A) nm for a molecule of A atoms, one frame per sample; the frames are independent
samples, not a time series (the DCD's time step is 1 ps). A toy's x: (N, D) has no atoms and no unit: it is written
only as XYZ, its D coordinates as ceil(D / 3) pseudo-atoms `X`, zero-padded, as they are.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from flowlab.molecular.wt_asbs.names import TRAJECTORY_SUFFIXES

__all__ = ["TRAJECTORY_SUFFIXES", "element_topology", "write_trajectory"]

NM_TO_ANGSTROM = 10.0


def element_topology(numbers: Sequence[int], residue: str):
    """An OpenMM `Topology` of one chain and one residue named `residue` holding one atom per atomic number in
    `numbers` (a molecule known only by its elements, such as the SN2 complex)."""
    from openmm import app

    top = app.Topology()
    res = top.addResidue(residue, top.addChain())
    for i, z in enumerate(numbers):
        element = app.element.Element.getByAtomicNumber(z)
        top.addAtom(f"{element.symbol}{i + 1}", element, res)
    return top


def _frames(x: torch.Tensor, atoms: int | None) -> np.ndarray:
    """x: (N, 3 atoms) -> (N, atoms, 3) float64; with atoms None (a toy), x: (N, D) -> (N, ceil(D / 3), 3)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or len(x) == 0:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected samples of shape (N, D) with N >= 1, got {shape}")
    if atoms is not None and x.shape[1] != 3 * atoms:
        raise ValueError(f"x: expected shape (N, {3 * atoms}) for the topology's {atoms} atoms, got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x: contains NaN or inf coordinates")
    pad = 3 * math.ceil(x.shape[1] / 3) - x.shape[1]
    flat = torch.nn.functional.pad(x.detach().cpu().double(), (0, pad))
    return flat.reshape(len(x), -1, 3).numpy()


def _write_pdb(frames: np.ndarray, topology, file) -> None:
    from openmm import app, unit

    app.PDBFile.writeHeader(topology, file)
    for i, pos in enumerate(frames):
        app.PDBFile.writeModel(topology, pos * unit.nanometer, file, modelIndex=i + 1)
    app.PDBFile.writeFooter(topology, file)


def _write_dcd(frames: np.ndarray, topology, file) -> None:
    from openmm import app, unit

    dcd = app.DCDFile(file, topology, 1.0 * unit.picosecond)
    for pos in frames:
        dcd.writeModel(pos * unit.nanometer)


def _write_xyz(frames: np.ndarray, symbols: Sequence[str], scale: float, file) -> None:
    for i, pos in enumerate(frames):
        file.write(f"{len(symbols)}\nframe {i}\n")
        file.writelines(f"{s} {a:.6f} {b:.6f} {c:.6f}\n" for s, (a, b, c) in zip(symbols, pos * scale, strict=True))


def write_trajectory(x: torch.Tensor, path: str | os.PathLike[str], *, topology=None) -> Path:
    """Write the samples x: (N, 3 A) nm of a molecule with the OpenMM `topology` (A atoms), or x: (N, D) of a toy
    (topology None), to `path`: .pdb (multi-model, 3 decimals in Å), .dcd (float32 Å) or .xyz (6 decimals; Å for a
    molecule, the toy's own units for a toy). ValueError naming `path` for another extension or for PDB/DCD without
    a topology, naming `x` for samples of the wrong shape or not finite. Returns the path written."""
    path = Path(path)
    suffix = path.suffix
    if suffix not in TRAJECTORY_SUFFIXES:
        raise ValueError(f"path: expected a {'|'.join(TRAJECTORY_SUFFIXES)} file, got {path.name!r}")
    if topology is None and suffix != ".xyz":
        raise ValueError(f"path: {suffix} needs a molecule's topology (a toy's samples are written as .xyz)")
    frames = _frames(x, None if topology is None else topology.getNumAtoms())
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".dcd":
        with path.open("wb") as file:
            _write_dcd(frames, topology, file)
        return path
    with path.open("w") as file:
        if suffix == ".pdb":
            _write_pdb(frames, topology, file)
        elif topology is None:
            _write_xyz(frames, ["X"] * frames.shape[1], 1.0, file)
        else:
            symbols = [a.element.symbol if a.element is not None else a.name for a in topology.atoms()]
            _write_xyz(frames, symbols, NM_TO_ANGSTROM, file)
    return path
