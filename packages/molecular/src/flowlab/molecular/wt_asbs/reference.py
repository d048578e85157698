"""References on the same energies: Langevin dynamics (plain or with well-tempered metadynamics) for the toys,
and OpenMM well-tempered metadynamics (`openmm.app.Metadynamics`) / plain Langevin MD for alanine dipeptide.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import trange

from flowlab.molecular.wt_asbs.aldp import PHI, PSI
from flowlab.molecular.wt_asbs.bias import WellTemperedBias
from flowlab.molecular.wt_asbs.cvs import CVSet, TorsionCV
from flowlab.molecular.wt_asbs.potentials import Potential, read_inpcrd, read_prmtop

__all__ = ["LangevinResult", "MetadResult", "check_metad", "langevin", "openmm_md", "openmm_wtmetad"]


@dataclass(frozen=True)
class LangevinResult:
    """samples: (N, D) recorded states; bias_values: (N,) V at each record (0 without bias); energy_evals; seconds."""

    samples: torch.Tensor
    bias_values: torch.Tensor
    energy_evals: int
    seconds: float


def langevin(
    potential: Potential,
    x_init: torch.Tensor,
    *,
    steps: int,
    dt: float,
    generator: torch.Generator,
    cvs: CVSet | None = None,
    bias: WellTemperedBias | None = None,
    deposit_every: int = 100,
    record_every: int = 10,
    burn_in: int = 0,
) -> LangevinResult:
    """Overdamped Langevin x <- x - grad(E + V) dt / kT + sqrt(2 dt) z for W walkers x_init: (W, D).

    With `bias`, every walker deposits a well-tempered hill every `deposit_every` steps (multiple-walker WTMetaD).
    NaN forces (an energy engine that failed on a configuration) count as zero for that step.
    """
    if (bias is None) != (cvs is None):
        raise ValueError("bias, cvs: give both (metadynamics) or neither (plain Langevin)")
    if steps < 1 or dt <= 0:
        raise ValueError(f"steps, dt: expected steps >= 1 and dt > 0, got {steps}, {dt}")
    start, evals0 = time.perf_counter(), potential.n_evals
    x = x_init.clone()
    recs, vals = [], []
    for i in range(steps):
        grad = torch.nan_to_num(-potential.energy_and_forces(x).forces, nan=0.0)  # a failed SCF: no force this step
        if bias is not None:
            s = cvs(x.to(bias.values))
            grad = grad + cvs.pullback(x, bias(s).grad).to(grad)
            if (i + 1) % deposit_every == 0:
                bias.add_hills(s)
        z = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        x = x - grad / potential.kT * dt + math.sqrt(2 * dt) * z
        if i >= burn_in and (i + 1) % record_every == 0:
            recs.append(x.clone())
            vals.append(bias(cvs(x.to(bias.values))).value if bias is not None else torch.zeros(len(x)))
    return LangevinResult(
        samples=torch.cat(recs),
        bias_values=torch.cat(vals).to(torch.float64),
        energy_evals=potential.n_evals - evals0,
        seconds=time.perf_counter() - start,
    )


@dataclass(frozen=True)
class MetadResult:
    """fes: (G, G) kJ/mol on the grid (None for plain MD); cvs: (N, 2) recorded (phi, psi); x: (N, 3 A) the
    positions recorded with them, nm; energy_evals; seconds; fes_history: (S, G, G) the FES after each
    `fes_every` steps (None unless asked for), for a convergence check."""

    fes: np.ndarray | None
    cvs: np.ndarray
    x: np.ndarray
    energy_evals: int
    seconds: float
    fes_history: np.ndarray | None = None


def _openmm_seed(seed: int) -> int:
    """Our seed as an OpenMM random seed: OpenMM reads 0 as "choose a fresh seed", so seed 0 would not reproduce."""
    return int(seed) % (2**31 - 2) + 1


def _simulation(prmtop: str | Path, inpcrd: str | Path, *, solvent, temperature, seed, platform, prepare=None):
    """An OpenMM `Simulation` of the prmtop's system (NoCutoff, HBonds, implicit `solvent` or vacuum; 2 fs
    LangevinMiddle at `temperature`, friction 1/ps) at the inpcrd's positions with velocities drawn at `temperature`,
    both seeded from `seed`; `prepare(system)` runs before the simulation is built (to add forces) and its result
    is returned beside it: (simulation, prepared)."""
    import openmm
    from openmm import app, unit

    top = read_prmtop(prmtop)
    positions = read_inpcrd(inpcrd, top.topology.getNumAtoms()) * unit.nanometer
    implicit = getattr(app, solvent) if solvent else None
    system = top.createSystem(nonbondedMethod=app.NoCutoff, constraints=app.HBonds, implicitSolvent=implicit)
    integ = openmm.LangevinMiddleIntegrator(temperature * unit.kelvin, 1.0 / unit.picosecond, 2.0 * unit.femtosecond)
    integ.setRandomNumberSeed(_openmm_seed(seed))
    plat = openmm.Platform.getPlatformByName(platform)
    props = {"Threads": "1"} if platform == "CPU" else {}
    prepared = None if prepare is None else prepare(system)
    sim = app.Simulation(top.topology, system, integ, plat, props)
    sim.context.setPositions(positions)
    sim.context.setVelocitiesToTemperature(temperature * unit.kelvin, _openmm_seed(seed))
    return sim, prepared


def _torsion_force(indices):
    import openmm

    f = openmm.CustomTorsionForce("theta")
    f.addTorsion(*indices)
    return f


def _record_cvs(positions_nm: np.ndarray) -> np.ndarray:
    x = torch.as_tensor(positions_nm, dtype=torch.float64).reshape(1, -1)
    return np.array([float(TorsionCV(PHI)(x)), float(TorsionCV(PSI)(x))])


def _positions(sim) -> np.ndarray:
    """The simulation's positions, flat: (3 A,) nm."""
    from openmm import unit

    state = sim.context.getState(getPositions=True)
    return np.asarray(state.getPositions(asNumpy=True).value_in_unit(unit.nanometer)).ravel()


def check_metad(*, steps: int, bias_factor: float, height: float, record_every: int = 100) -> None:
    """`openmm_wtmetad`'s checks of its settings (a ValueError naming the argument), to run before any file is read."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < record_every:
        raise ValueError(f"steps: expected at least record_every={record_every} MD steps, got {steps!r}")
    if not (math.isfinite(bias_factor) and bias_factor > 1):
        raise ValueError(f"bias_factor: expected a finite well-tempered bias factor > 1, got {bias_factor!r}")
    if not (math.isfinite(height) and height > 0):
        raise ValueError(f"height: expected a positive hill height in kJ/mol, got {height!r}")


def openmm_wtmetad(
    prmtop: str | Path,
    inpcrd: str | Path,
    *,
    steps: int,
    solvent: str | None = None,
    temperature: float = 300.0,
    bias_factor: float = 8.0,
    height: float = 1.0,
    width: float = 0.35,
    grid: int = 150,
    frequency: int = 500,
    record_every: int = 100,
    seed: int = 0,
    platform: str = "CPU",
    fes_every: int | None = None,
    progress: bool = False,
) -> MetadResult:
    """OpenMM well-tempered metadynamics over (phi, psi), 2 fs LangevinMiddle, HBonds; FES from getFreeEnergy(),
    also after every `fes_every` steps (a multiple of `record_every`) into `fes_history`; `progress`: a tqdm bar."""
    check_metad(steps=steps, bias_factor=bias_factor, height=height, record_every=record_every)
    if fes_every is not None and (fes_every < record_every or fes_every % record_every):
        raise ValueError(f"fes_every: expected a multiple of record_every={record_every}, got {fes_every!r}")
    from openmm import app, unit

    def metadynamics(system):
        variables = [
            app.BiasVariable(_torsion_force(idx), -math.pi, math.pi, width, periodic=True, gridWidth=grid)
            for idx in (PHI, PSI)
        ]
        return app.Metadynamics(
            system, variables, temperature * unit.kelvin, bias_factor, height * unit.kilojoule_per_mole, frequency
        )

    sim, meta = _simulation(
        prmtop, inpcrd, solvent=solvent, temperature=temperature, seed=seed, platform=platform, prepare=metadynamics
    )
    start = time.perf_counter()
    recs, xs, history = [], [], []
    for i in trange(steps // record_every, desc="WTMetaD", unit="record", disable=not progress, mininterval=10):
        meta.step(sim, record_every)
        recs.append(np.asarray(meta.getCollectiveVariables(sim)))
        xs.append(_positions(sim))
        if fes_every is not None and ((i + 1) * record_every) % fes_every == 0:
            history.append(np.asarray(meta.getFreeEnergy().value_in_unit(unit.kilojoule_per_mole)))
    fes = meta.getFreeEnergy().value_in_unit(unit.kilojoule_per_mole)
    seconds = time.perf_counter() - start
    return MetadResult(
        fes=np.asarray(fes), cvs=np.stack(recs), x=np.stack(xs), energy_evals=steps, seconds=seconds,
        fes_history=np.stack(history) if history else None,
    )  # fmt: skip


def openmm_md(
    prmtop: str | Path,
    inpcrd: str | Path,
    *,
    steps: int,
    solvent: str | None = None,
    temperature: float = 300.0,
    record_every: int = 100,
    seed: int = 0,
    platform: str = "CPU",
) -> MetadResult:
    """Plain Langevin MD (2 fs LangevinMiddle, HBonds), recording positions and (phi, psi) every `record_every`
    steps."""
    sim, _ = _simulation(prmtop, inpcrd, solvent=solvent, temperature=temperature, seed=seed, platform=platform)
    start = time.perf_counter()
    xs = []
    for _ in range(steps // record_every):
        sim.step(record_every)
        xs.append(_positions(sim))
    x = np.stack(xs)
    cvs = np.stack([_record_cvs(pos) for pos in x])
    return MetadResult(fes=None, cvs=cvs, x=x, energy_evals=steps, seconds=time.perf_counter() - start)
