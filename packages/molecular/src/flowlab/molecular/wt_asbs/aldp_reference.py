"""The converged alanine-dipeptide reference: one long OpenMM well-tempered metadynamics run over (phi, psi), built
once and cached as the artifact "mol.aldp_wtmetad" (its key covers the prmtop/inpcrd SHA-256 and the OpenMM
version), with the FES after every `fes_every` steps so that its own convergence can be read off.

    ref = aldp_reference(ReferenceConfig(), data_root)
    ref.fes                     # (G, G) kJ/mol, OpenMM order (psi, phi)
    ref.convergence(kT)         # Delta F of every basin at every snapshot: is it still moving?
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.molecular.wt_asbs.aldp import aldp_files, basin_df_from_fes
from flowlab.molecular.wt_asbs.reference import openmm_wtmetad

__all__ = ["AldpReference", "ReferenceConfig", "aldp_reference", "reference_artifact"]

#: OpenMM CPU platform, one thread, on the 2-core machine beside another job: 2.5M steps in 491 s
_STEPS_PER_SECOND = 5000.0


@dataclass(frozen=True)
class ReferenceConfig(Config):
    """steps: 2 fs MD steps (2.5M = 5 ns); hills of `height` kJ/mol and `width` rad every `frequency` steps at
    `bias_factor`, on a `grid`^2 grid; FES snapshots every `fes_every` steps; `solvent` (OpenMM implicit) and `seed`;
    the OpenMM version, part of the cache key."""

    steps: int = 2_500_000
    height: float = 1.0
    width: float = 0.35
    frequency: int = 500
    bias_factor: float = 8.0
    grid: int = 150
    fes_every: int = 125_000
    solvent: str | None = "OBC1"
    seed: int = 12345
    openmm: str = field(default_factory=lambda: version("openmm"))


@dataclass(frozen=True)
class _Build(Config):
    """The builder's view: the reference's settings and the absolute data set folder."""

    reference: ReferenceConfig
    prmtop: str
    inpcrd: str


def _build(build: _Build, folder: Path) -> None:
    cfg = build.reference
    run = openmm_wtmetad(
        build.prmtop, build.inpcrd, steps=cfg.steps, solvent=cfg.solvent, bias_factor=cfg.bias_factor,
        height=cfg.height, width=cfg.width, grid=cfg.grid, frequency=cfg.frequency, seed=cfg.seed,
        fes_every=cfg.fes_every, progress=True,
    )  # fmt: skip
    np.savez_compressed(
        folder / "wtmetad.npz", fes=run.fes, fes_history=run.fes_history, cvs=run.cvs,
        seconds=np.array(run.seconds), energy_evals=np.array(run.energy_evals),
    )  # fmt: skip


def reference_artifact(config: ReferenceConfig, data_root: str | Path | None = None) -> Artifact:
    """The cached artifact "mol.aldp_wtmetad" of `config` on the shipped prmtop/inpcrd under `data_root`."""
    prmtop, inpcrd = (p.resolve() for p in aldp_files(data_root))
    return Artifact("mol.aldp_wtmetad", _build, _Build(config, str(prmtop), str(inpcrd)), inputs=(prmtop, inpcrd),
                    expected_seconds=config.steps / _STEPS_PER_SECOND,
                    description="alanine dipeptide: long OpenMM WTMetaD reference FES")  # fmt: skip


@dataclass(frozen=True)
class AldpReference:
    """fes: (G, G) kJ/mol (OpenMM order psi, phi); fes_history: (S, G, G) after each `fes_every` steps; cvs: (N, 2)
    the recorded (phi, psi); steps between snapshots; seconds and energy_evals of the run."""

    fes: np.ndarray
    fes_history: np.ndarray
    cvs: np.ndarray
    fes_every: int
    seconds: float
    energy_evals: int

    def convergence(self, kT: float) -> dict[str, np.ndarray]:
        """Delta F (kJ/mol, relative to C7eq) of every basin at every snapshot: {"steps": (S,), "dF_C7ax": (S,),
        ...}."""
        rows = [basin_df_from_fes(f, kT) for f in self.fes_history]
        out = {"steps": self.fes_every * np.arange(1, len(rows) + 1)}
        out.update({k: np.array([r[k] for r in rows]) for k in rows[0]})
        return out


def aldp_reference(config: ReferenceConfig, data_root: str | Path | None = None) -> AldpReference:
    """The reference of `config`, built once into the artifact cache (about steps / 5000 s on one core) and loaded."""
    entry = ensure(reference_artifact(config, data_root))
    with np.load(entry.path / "wtmetad.npz") as z:
        return AldpReference(
            fes=z["fes"], fes_history=z["fes_history"], cvs=z["cvs"], fes_every=config.fes_every,
            seconds=float(z["seconds"]), energy_evals=int(z["energy_evals"]),
        )  # fmt: skip
