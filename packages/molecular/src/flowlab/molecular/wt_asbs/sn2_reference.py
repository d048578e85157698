"""The SN2 reference: multiple-walker well-tempered metadynamics on the same GFN2-xTB energy, every walker started
in the reactant complex, built once and cached as the artifact "mol.sn2_wtmetad" (its key covers the settings and
the tblite version), with the PMF after every `fes_every` steps so that its own convergence can be read off.

The walkers run overdamped Langevin on `sn2.internal_system`'s coordinates with the reaction line scaled to its
harmonic width (every coordinate then has unit variance in the wells, so one step size suits all of them).

    ref = sn2_reference(SN2ReferenceConfig())
    ref.pmf                     # (G,) F / kT on ref.nodes (xi, nm)
    ref.convergence()           # Delta F and the barrier at every snapshot: are they still moving?
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.molecular.wt_asbs.analysis import delta_f_from_pmf
from flowlab.molecular.wt_asbs.bias import BiasConfig
from flowlab.molecular.wt_asbs.reference import langevin
from flowlab.molecular.wt_asbs.sn2 import REACTANT, WELLS, internal_system, pmf_barrier, sn2_potential

__all__ = ["SN2Reference", "SN2ReferenceConfig", "reference_artifact", "sn2_reference"]

#: GFN2-xTB calls per second with two tblite workers on the 2-core machine (the default build: 640k calls in 997 s,
#: another job beside it for its first 5 minutes)
_CALLS_PER_SECOND = 640.0


@dataclass(frozen=True)
class SN2ReferenceConfig(Config):
    """walkers x steps overdamped Langevin steps of `dt` (internal units), each walker depositing a hill of `bias`
    every `deposit_every` steps on a grid over xi in `grid_range` (nm); PMF snapshots every `fes_every` steps; the
    C-Cl walls (`sn2_potential`'s wall_nm, wall_k); tblite `workers`, `seed`; the tblite version, part of the cache
    key."""

    walkers: int = 32
    steps: int = 20_000
    dt: float = 0.1
    bias: BiasConfig = field(default_factory=lambda: BiasConfig(bins=150, sigma=0.01, height=1.0, bias_factor=8.0,
                                                                walls=((-0.2, 0.2),)))  # fmt: skip
    deposit_every: int = 10
    grid_range: tuple[float, float] = (-0.3, 0.3)
    fes_every: int = 2000
    wall_nm: float = 0.32
    wall_k: float = 5e4
    workers: int = 2
    seed: int = 12345
    tblite: str = field(default_factory=lambda: version("tblite"))


def _build(cfg: SN2ReferenceConfig, folder: Path) -> None:
    pot = sn2_potential(workers=cfg.workers, wall_nm=cfg.wall_nm, wall_k=cfg.wall_k)
    ip, cvs = internal_system(pot, reaction_units=None)
    bias = cfg.bias.build(*cfg.grid_range, kT=pot.kT)
    z = ip.z(REACTANT).repeat(cfg.walkers, 1)
    generator = torch.Generator().manual_seed(cfg.seed)
    history, seconds = [], 0.0
    for _ in tqdm(range(cfg.steps // cfg.fes_every), desc="SN2 WTMetaD reference", unit="snapshot"):
        run = langevin(ip, z, steps=cfg.fes_every, dt=cfg.dt, generator=generator, cvs=cvs, bias=bias,
                       deposit_every=cfg.deposit_every, record_every=cfg.fes_every)  # fmt: skip
        z, seconds = run.samples[-cfg.walkers :], seconds + run.seconds
        history.append((bias.free_energy() / pot.kT).numpy())
    np.savez_compressed(
        folder / "wtmetad.npz", nodes=bias.nodes[0].numpy(), pmf_history=np.stack(history), seconds=np.array(seconds),
        energy_evals=np.array(pot.n_evals), hills=np.array(bias.n_hills),
    )  # fmt: skip


def reference_artifact(config: SN2ReferenceConfig) -> Artifact:
    """The cached artifact "mol.sn2_wtmetad" of `config`."""
    seconds = config.walkers * config.steps / _CALLS_PER_SECOND
    return Artifact("mol.sn2_wtmetad", _build, config, expected_seconds=seconds,
                    description="SN2 Cl- + CH3Cl: multiple-walker WTMetaD reference PMF on GFN2-xTB")  # fmt: skip


@dataclass(frozen=True)
class SN2Reference:
    """nodes: (G,) xi (nm); pmf_history: (S, G) F / kT after each `fes_every` steps (the last is the reference);
    seconds, energy_evals and hills of the run."""

    nodes: np.ndarray
    pmf_history: np.ndarray
    fes_every: int
    seconds: float
    energy_evals: int
    hills: int

    @property
    def pmf(self) -> np.ndarray:
        """The final PMF F / kT: (G,), minimum 0."""
        return self.pmf_history[-1]

    def convergence(self) -> dict[str, np.ndarray]:
        """Delta F (product - reactant, kT) and the barrier (kT) at every snapshot: {"steps", "dF", "barrier"},
        each (S,)."""
        nodes = torch.as_tensor(self.nodes)
        pmfs = [torch.as_tensor(f) for f in self.pmf_history]
        return {
            "steps": self.fes_every * np.arange(1, len(pmfs) + 1),
            "dF": np.array([delta_f_from_pmf(f, nodes, WELLS["reactant"], WELLS["product"]) for f in pmfs]),
            "barrier": np.array([pmf_barrier(f, nodes) for f in pmfs]),
        }


def sn2_reference(config: SN2ReferenceConfig) -> SN2Reference:
    """The reference of `config`, built once into the artifact cache (about walkers x steps / 700 s) and loaded."""
    entry = ensure(reference_artifact(config))
    with np.load(entry.path / "wtmetad.npz") as z:
        return SN2Reference(
            nodes=z["nodes"], pmf_history=z["pmf_history"], fes_every=config.fes_every, seconds=float(z["seconds"]),
            energy_evals=int(z["energy_evals"]), hills=int(z["hills"]),
        )  # fmt: skip
