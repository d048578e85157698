"""Energy engines behind one protocol: `energy_and_forces(x) -> EnergyForces(energy, forces)`, batched.

Configurations are flat: x: (B, D) with D = 3 N for molecules (nm) and D = 2 (+ extra) for the analytic toys.
Molecular energies are kJ/mol and forces kJ/mol/nm; the toys are dimensionless (energies in units of k_BT = 1).
Every engine counts its energy evaluations (one per configuration) in `n_evals`.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from flowlab.datasets import root

__all__ = [
    "BOHR_NM",
    "EV_TO_KJMOL",
    "HARTREE_TO_KJMOL",
    "KB_KJMOL",
    "DistanceWalls",
    "EmbeddedToy",
    "EnergyForces",
    "FourWell",
    "MuellerBrown",
    "OpenMMPotential",
    "Potential",
    "TBLitePotential",
    "ToyPotential",
    "WrappedPotential",
    "kT_kjmol",
    "read_inpcrd",
    "read_pdb",
    "read_positions",
    "read_prmtop",
    "read_system_xml",
]

EV_TO_KJMOL = 96.48533212  # 1 eV in kJ/mol
KB_KJMOL = 0.0083144626  # Boltzmann constant in kJ/mol/K
HARTREE_TO_KJMOL = 2625.499639  # 1 Hartree in kJ/mol (CODATA 2018)
BOHR_NM = 0.0529177210903  # 1 Bohr in nm (CODATA 2018)
KB_HARTREE = KB_KJMOL / HARTREE_TO_KJMOL  # Boltzmann constant in Hartree/K


def kT_kjmol(temperature: float) -> float:
    """k_B T in kJ/mol at `temperature` kelvin (2.494 kJ/mol at 300 K)."""
    if not temperature > 0:
        raise ValueError(f"temperature: expected a positive temperature in kelvin, got {temperature!r}")
    return KB_KJMOL * temperature


def read_prmtop(prmtop: str | Path):
    """OpenMM's `AmberPrmtopFile` of `prmtop`, checked to build a system; FileNotFoundError or ValueError naming the
    file."""
    from openmm import app

    path = Path(prmtop)
    if not path.is_file():
        data = root(required=False) or "<unset>"
        raise FileNotFoundError(f"prmtop: file not found: {path} (alanine_dipeptide data set; data root {data})")
    try:
        prmtop = app.AmberPrmtopFile(str(path))
        prmtop.createSystem()  # reads the force-field sections, which a truncated file lacks
    except Exception as err:  # OpenMM raises assorted types on malformed files
        raise ValueError(f"prmtop: could not parse {path} as an AMBER prmtop: {err!r}") from err
    return prmtop


def read_inpcrd(inpcrd: str | Path, n_atoms: int) -> np.ndarray:
    """The coordinates of an AMBER inpcrd, (n_atoms, 3) nm; FileNotFoundError or ValueError naming the file (one
    that is not an inpcrd, or of another atom count)."""
    from openmm import app, unit

    path = Path(inpcrd)
    if not path.is_file():
        raise FileNotFoundError(f"inpcrd: file not found: {path}")
    try:
        pos = app.AmberInpcrdFile(str(path)).getPositions(asNumpy=True).value_in_unit(unit.nanometer)
    except Exception as err:
        raise ValueError(f"inpcrd: could not parse {path}: {err}") from err
    if len(pos) != n_atoms:
        raise ValueError(f"inpcrd: {path} has {len(pos)} atoms, the topology has {n_atoms}")
    return np.asarray(pos)


def read_system_xml(xml: str | Path):
    """The OpenMM `System` serialised in the XML file `xml` (`openmm.XmlSerializer.serialize`); FileNotFoundError
    or ValueError naming the file (one that is not a serialised System)."""
    import openmm

    path = Path(xml)
    if not path.is_file():
        raise FileNotFoundError(f"xml: file not found: {path}")
    try:
        system = openmm.XmlSerializer.deserialize(path.read_text())
    except Exception as err:  # OpenMM raises assorted types on malformed files; bytes that are not text too
        why = f"{type(err).__name__}: {str(err)[:120]}"
        raise ValueError(f"xml: could not parse {path} as a serialised OpenMM System ({why})") from err
    if not isinstance(system, openmm.System) or system.getNumParticles() == 0:
        raise ValueError(f"xml: {path} holds no serialised OpenMM System with particles")
    return system


def read_pdb(pdb: str | Path, n_atoms: int | None = None):
    """OpenMM's `PDBFile` of `pdb` (its first model's positions and its topology), checked to hold `n_atoms` atoms
    where given; FileNotFoundError or ValueError naming the file."""
    from openmm import app

    path = Path(pdb)
    if not path.is_file():
        raise FileNotFoundError(f"pdb: file not found: {path}")
    try:
        pdb_file = app.PDBFile(str(path))
    except Exception as err:
        raise ValueError(f"pdb: could not parse {path}: {err!r}") from err
    atoms = pdb_file.topology.getNumAtoms()
    if atoms == 0 or (n_atoms is not None and atoms != n_atoms):
        raise ValueError(f"pdb: {path} has {atoms} atoms, the system has {n_atoms}")
    return pdb_file


def read_positions(positions: str | Path, n_atoms: int) -> np.ndarray:
    """The coordinates (n_atoms, 3) nm of a .inpcrd (`read_inpcrd`) or .pdb file (`read_pdb`, its first model);
    ValueError naming `positions` for another extension, the readers' errors naming the file otherwise."""
    from openmm import unit

    suffix = Path(positions).suffix
    if suffix == ".inpcrd":
        return read_inpcrd(positions, n_atoms)
    if suffix == ".pdb":
        return np.asarray(read_pdb(positions, n_atoms).getPositions(asNumpy=True).value_in_unit(unit.nanometer))
    raise ValueError(f"positions: expected a .inpcrd or .pdb file, got {Path(positions).name!r}")


@dataclass(frozen=True)
class EnergyForces:
    """energy: (B,); forces = -dE/dx: (B, D)."""

    energy: torch.Tensor
    forces: torch.Tensor


@runtime_checkable
class Potential(Protocol):
    """A batched energy: `dim` (D), `kT` (k_BT in the energy's unit), `n_evals`, `energy_and_forces(x: (B, D))`."""

    dim: int
    kT: float
    n_evals: int

    def energy_and_forces(self, x: torch.Tensor) -> EnergyForces:
        """x: (B, D) -> energies (B,) and forces (B, D) = -dE/dx; adds B to `n_evals`."""
        ...


def _check_batch(x: torch.Tensor, dim: int, *, atoms: int | None = None) -> None:
    """x: (B, dim) finite; with `atoms`, a wrong multiple of 3 columns is reported as a wrong atom count."""
    if atoms is not None and isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[1] != dim and x.shape[1] % 3 == 0:
        raise ValueError(f"x: {x.shape[1] // 3} atoms given, the system has {atoms} (D = {dim})")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != dim:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x: expected shape (B, {dim}), got {shape}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x: contains NaN or inf coordinates")


class ToyPotential:
    """Analytic 2-D energy (in k_BT) evaluated with autograd; subclasses define `energy(x: (B, 2)) -> (B,)`.

    `minima`: (K, 2) basin centres (for basin coverage); `box`: ((x_lo, x_hi), (y_lo, y_hi)) for quadrature.
    """

    dim = 2
    kT = 1.0
    minima: tuple[tuple[float, float], ...] = ()
    box: tuple[tuple[float, float], tuple[float, float]] = ((-1.0, 1.0), (-1.0, 1.0))
    basin_radius = 0.3

    def __init__(self) -> None:
        self.n_evals = 0

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 2 or D) -> energies (B,) in k_BT; each toy defines it."""
        raise NotImplementedError

    def energy_and_forces(self, x: torch.Tensor) -> EnergyForces:
        """x: (B, D) -> energies (B,) and forces -dE/dx (B, D) by autograd; adds B to `n_evals`."""
        _check_batch(x, self.dim)
        self.n_evals += x.shape[0]
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            e = self.energy(xg)
            (grad,) = torch.autograd.grad(e.sum(), xg)
        return EnergyForces(energy=e.detach(), forces=-grad)


class MuellerBrown(ToyPotential):
    """Mueller-Brown surface times `beta` (0.1 by default: energies in k_BT, barriers ~7-10 k_BT, three minima)."""

    _A = (-200.0, -100.0, -170.0, 15.0)
    _a = (-1.0, -1.0, -6.5, 0.7)
    _b = (0.0, 0.0, 11.0, 0.6)
    _c = (-10.0, -10.0, -6.5, 0.7)
    _x0 = (1.0, 0.0, -0.5, -1.0)
    _y0 = (0.0, 0.5, 1.5, 1.0)
    minima = ((-0.558, 1.442), (-0.050, 0.467), (0.623, 0.028))
    box = ((-1.7, 1.3), (-0.6, 2.2))
    basin_radius = 0.3

    def __init__(self, beta: float = 0.1) -> None:
        super().__init__()
        if not beta > 0:
            raise ValueError(f"beta: expected a positive inverse temperature, got {beta!r}")
        self.beta = float(beta)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 2) -> the scaled Mueller-Brown energies (B,)."""
        u, v = x[:, 0], x[:, 1]
        e = torch.zeros_like(u)
        for A, a, b, c, x0, y0 in zip(self._A, self._a, self._b, self._c, self._x0, self._y0, strict=True):
            du, dv = u - x0, v - y0
            e = e + A * torch.exp(a * du * du + b * du * dv + c * dv * dv)
        return self.beta * e


class FourWell(ToyPotential):
    """E = a (x^2 - 1)^2 + b (y^2 - 1)^2 + c x + d y (k_BT): four wells near (+-1, +-1), tilted by c, d.

    The default barrier along x (a = 6 k_BT) is high and the tilt makes the x > 0 wells rare; along y it is low.
    """

    box = ((-2.2, 2.2), (-2.2, 2.2))
    basin_radius = 0.6

    def __init__(self, a: float = 6.0, b: float = 3.0, c: float = 1.5, d: float = 0.5) -> None:
        super().__init__()
        self.a, self.b, self.c, self.d = float(a), float(b), float(c), float(d)
        self.minima = tuple((sx * 1.0, sy * 1.0) for sx in (-1, 1) for sy in (-1, 1))

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 2) -> the four-well energies (B,)."""
        u, v = x[:, 0], x[:, 1]
        return self.a * (u * u - 1) ** 2 + self.b * (v * v - 1) ** 2 + self.c * u + self.d * v


class EmbeddedToy(ToyPotential):
    """A 2-D toy plus `extra` harmonic coordinates 0.5 k z^2: the PMF along x is unchanged, D = 2 + extra."""

    def __init__(self, base: ToyPotential, extra: int, *, stiffness: float = 4.0) -> None:
        super().__init__()
        if not isinstance(extra, int) or extra < 0:
            raise ValueError(f"extra: expected a non-negative number of extra dimensions, got {extra!r}")
        self.base, self.extra, self.stiffness = base, extra, float(stiffness)
        self.dim = 2 + extra
        self.minima, self.box, self.basin_radius = base.minima, base.box, base.basin_radius

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 2 + extra) -> the 2-D toy's energy plus the harmonic terms: (B,)."""
        return self.base.energy(x[:, :2]) + 0.5 * self.stiffness * (x[:, 2:] ** 2).sum(-1)


class OpenMMPotential:
    """An AMBER prmtop (NoCutoff, no constraints) or a serialised OpenMM `System` (.xml, its forces as they are;
    constraints play no part in energies) through OpenMM, batched by a pool of Contexts.

    system: path of the .prmtop or .xml; solvent: None (vacuum) or "OBC1"/"OBC2"/"GBn"/"GBn2"/"HCT" implicit solvent
    (a prmtop only); temperature: K (sets kT in kJ/mol); workers: number of Contexts (one thread each); platform:
    OpenMM platform name; `topology`: the prmtop's (None for an XML system). x: (B, 3 N) in nm -> energies (B,)
    kJ/mol, forces (B, 3 N) kJ/mol/nm.
    """

    def __init__(
        self,
        system: str | Path,
        *,
        solvent: str | None = None,
        temperature: float = 300.0,
        workers: int = 1,
        platform: str = "Reference",
    ) -> None:
        import openmm
        from openmm import app

        implicit = None
        if solvent is not None:
            if solvent not in ("OBC1", "OBC2", "GBn", "GBn2", "HCT"):
                raise ValueError(f"solvent: expected None or one of OBC1/OBC2/GBn/GBn2/HCT, got {solvent!r}")
            implicit = getattr(app, solvent)
        if Path(system).suffix == ".xml":
            if solvent is not None:
                raise ValueError(f"solvent: an XML system holds its own forces, got solvent {solvent!r}")
            self.topology, system = None, read_system_xml(system)
        else:
            prmtop = read_prmtop(system)
            self.topology = prmtop.topology
            system = prmtop.createSystem(nonbondedMethod=app.NoCutoff, constraints=None, implicitSolvent=implicit)
        self.n_atoms = system.getNumParticles()
        self.dim = 3 * self.n_atoms
        self.kT = kT_kjmol(temperature)
        self.temperature = float(temperature)
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers: expected a positive integer, got {workers!r}")
        plat = openmm.Platform.getPlatformByName(platform)
        props = {"Threads": "1"} if platform == "CPU" else {}
        self._contexts = [openmm.Context(system, openmm.VerletIntegrator(0.001), plat, props) for _ in range(workers)]
        self._pool = ThreadPoolExecutor(workers) if workers > 1 else None
        self.n_evals = 0

    def _eval_chunk(self, ctx, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from openmm import unit

        energies = np.empty(len(xs))
        forces = np.empty_like(xs)
        for i, pos in enumerate(xs):
            ctx.setPositions(pos.reshape(-1, 3))
            state = ctx.getState(getEnergy=True, getForces=True)
            energies[i] = state.getPotentialEnergy().value_in_unit(unit.kilojoule_per_mole)
            forces[i] = state.getForces(asNumpy=True).value_in_unit(unit.kilojoule_per_mole / unit.nanometer).ravel()
        return energies, forces

    def positions(self, positions: str | Path) -> torch.Tensor:
        """The coordinates of an AMBER inpcrd or a PDB file (`read_positions`) as (1, 3 N) nm float64, checked
        against this system's atom count."""
        return torch.as_tensor(read_positions(positions, self.n_atoms), dtype=torch.float64).reshape(1, -1)

    def energy_and_forces(self, x: torch.Tensor) -> EnergyForces:
        """x: (B, 3 N) in nm -> energies (B,) kJ/mol and forces (B, 3 N) kJ/mol/nm, spread over the Contexts."""
        _check_batch(x, self.dim, atoms=self.n_atoms)
        xs = x.detach().to("cpu", torch.float64).numpy()
        self.n_evals += len(xs)
        if self._pool is None:
            e, f = self._eval_chunk(self._contexts[0], xs)
        else:
            chunks = np.array_split(np.arange(len(xs)), len(self._contexts))
            parts = list(self._pool.map(lambda a: self._eval_chunk(a[0], xs[a[1]]), zip(self._contexts, chunks)))
            e = np.concatenate([p[0] for p in parts])
            f = np.concatenate([p[1] for p in parts])
        kw = {"device": x.device, "dtype": x.dtype}
        return EnergyForces(energy=torch.as_tensor(e, **kw), forces=torch.as_tensor(f, **kw))


class TBLitePotential:
    """Semi-empirical tight binding (GFN2-xTB or GFN1-xTB) through `tblite`, whose parameters ship in its wheel.

    numbers: (N,) atomic numbers; charge: total charge (e.g. -1 for Cl- + CH3Cl); uhf: unpaired electrons (their
    parity must match the electron count); temperature: K (sets kT). x: (B, 3 N) in nm -> energies (B,) kJ/mol,
    forces (B, 3 N) kJ/mol/nm, one single-point calculation per configuration, spread over `workers` threads.

    A configuration whose SCF does not converge is retried with Fermi smearing at `retry_smearing` K, a slightly
    different surface (0.8 kT lower at the SN2 reactant complex; counted in `n_retried`). If that fails too, or
    tblite refuses the geometry (atoms too close, an overlap matrix that is not positive definite), its energy and
    forces are NaN (counted in `n_failed`); ASBS and `langevin` treat NaN forces as zero.
    """

    def __init__(
        self,
        numbers,
        *,
        charge: float = 0.0,
        uhf: int = 0,
        method: str = "GFN2-xTB",
        temperature: float = 300.0,
        workers: int = 1,
        retry_smearing: float = 5000.0,
    ) -> None:
        from tblite.exceptions import TBLiteRuntimeError
        from tblite.interface import Calculator

        z = np.asarray(numbers)
        if z.ndim != 1 or z.size == 0 or not np.issubdtype(z.dtype, np.integer) or (z < 1).any() or (z > 86).any():
            raise ValueError(f"numbers: expected a 1-D list of atomic numbers in 1..86, got {numbers!r}")
        if method not in ("GFN2-xTB", "GFN1-xTB"):
            raise ValueError(f"method: expected 'GFN2-xTB' or 'GFN1-xTB', got {method!r}")
        if not (isinstance(charge, int | float) and float(charge).is_integer()):
            raise ValueError(f"charge: expected a whole number, got {charge!r}")
        electrons = int(z.sum()) - int(charge)
        if not isinstance(uhf, int) or uhf < 0 or electrons < 0 or (electrons - uhf) % 2:
            raise ValueError(f"uhf: {uhf!r} unpaired electrons do not fit {electrons} electrons (charge {charge})")
        if not retry_smearing > 0:
            raise ValueError(f"retry_smearing: expected a positive temperature in kelvin, got {retry_smearing!r}")
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers: expected a positive integer, got {workers!r}")
        self._calculator, self._scf_error = Calculator, TBLiteRuntimeError
        self.numbers, self.charge, self.uhf, self.method = z.astype(np.int64), float(charge), uhf, method
        self.n_atoms = len(z)
        self.dim = 3 * self.n_atoms
        self.kT = kT_kjmol(temperature)
        self.retry_smearing = float(retry_smearing)
        # tblite's OpenMP runtime would start one thread per core for every 6-atom call: one per worker instead
        self._pool = ThreadPoolExecutor(workers, initializer=threadpool_limits, initargs=(1, "openmp"))
        self.n_evals = 0
        self.n_retried = 0
        self.n_failed = 0

    def _single(self, pos_nm: np.ndarray) -> tuple[float, np.ndarray, bool]:
        """pos_nm: (3 N,) -> (energy kJ/mol, forces (3 N,) kJ/mol/nm, whether the SCF was retried with smearing);
        NaN energy and forces where no attempt gave an energy."""
        bohr = pos_nm.reshape(-1, 3) / BOHR_NM
        for attempt, smearing in enumerate((None, self.retry_smearing)):
            try:
                calc = self._calculator(self.method, self.numbers, bohr, charge=self.charge, uhf=self.uhf)
                calc.set("verbosity", 0)
                if smearing is not None:
                    calc.set("temperature", smearing * KB_HARTREE)
                res = calc.singlepoint()
            except self._scf_error as err:
                if "SCF not converged" not in str(err):  # a geometry tblite cannot solve: no energy, no retry
                    return math.nan, np.full(self.dim, math.nan), attempt > 0
                continue
            grad = res.get("gradient") * (HARTREE_TO_KJMOL / BOHR_NM)
            return float(res.get("energy")) * HARTREE_TO_KJMOL, -grad.ravel(), attempt > 0
        return math.nan, np.full(self.dim, math.nan), True

    def energy_and_forces(self, x: torch.Tensor) -> EnergyForces:
        """x: (B, 3 N) in nm -> energies (B,) kJ/mol and forces (B, 3 N) kJ/mol/nm from one single point each."""
        _check_batch(x, self.dim, atoms=self.n_atoms)
        xs = x.detach().to("cpu", torch.float64).numpy()
        self.n_evals += len(xs)
        parts = list(self._pool.map(self._single, xs))
        self.n_retried += sum(p[2] for p in parts)
        self.n_failed += sum(math.isnan(p[0]) for p in parts)
        kw = {"device": x.device, "dtype": x.dtype}
        energy = torch.as_tensor(np.array([p[0] for p in parts]), **kw)
        return EnergyForces(energy=energy, forces=torch.as_tensor(np.stack([p[1] for p in parts]), **kw))


class WrappedPotential:
    """A potential built on another one, `base`, whose energy calls (`n_evals`, readable and resettable) are its
    own: the wrapper adds none."""

    base: Potential

    @property
    def n_evals(self) -> int:
        """The base potential's energy calls (one per configuration)."""
        return self.base.n_evals

    @n_evals.setter
    def n_evals(self, value: int) -> None:
        self.base.n_evals = value


class DistanceWalls(WrappedPotential):
    """A molecular potential plus flat-bottom harmonic walls 0.5 k (d_ij - upper)^2 for d_ij > upper (kJ/mol, nm).

    walls: ((i, j, upper), ...) atom pairs and their upper distances (nm); they keep a gas-phase complex from
    dissociating, so that its free energy along a reaction coordinate is defined. k: kJ/mol/nm^2. Same protocol as
    `base`, whose counters (`n_evals`, and `n_retried` / `n_failed` where it has them) it shares.
    """

    def __init__(self, base, walls, *, k: float = 5000.0) -> None:
        if base.dim % 3:
            raise ValueError(f"base: expected a molecular potential (D = 3 N), got D = {base.dim}")
        if not k > 0:
            raise ValueError(f"k: expected a positive force constant, got {k!r}")
        n = base.dim // 3
        try:
            self.walls = tuple((int(i), int(j), float(u)) for i, j, u in walls)
        except (TypeError, ValueError) as err:
            raise ValueError(f"walls: expected (i, j, upper) triples, got {walls!r}") from err
        for i, j, u in self.walls:
            if not (0 <= i < n and 0 <= j < n and i != j and u > 0):
                raise ValueError(
                    f"walls: expected distinct atom indices below {n} and a positive distance, got {(i, j, u)}"
                )
        self.base, self.k = base, float(k)
        self.dim, self.kT = base.dim, base.kT

    def __getattr__(self, name: str):
        if name in ("n_retried", "n_failed"):
            return getattr(self.base, name)
        raise AttributeError(name)

    def wall_energy(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, D) -> (B,) wall energy (kJ/mol)."""
        atoms = x.reshape(len(x), -1, 3)
        e = torch.zeros(len(x), dtype=x.dtype, device=x.device)
        for i, j, upper in self.walls:
            excess = ((atoms[:, i] - atoms[:, j]).norm(dim=-1) - upper).clamp_min(0)
            e = e + 0.5 * self.k * excess**2
        return e

    def energy_and_forces(self, x: torch.Tensor) -> EnergyForces:
        """x: (B, D) -> base energy + walls (B,), forces (B, D)."""
        out = self.base.energy_and_forces(x)
        with torch.enable_grad():
            xg = x.detach().to(out.forces.dtype).requires_grad_(True)
            wall = self.wall_energy(xg)
            (grad,) = torch.autograd.grad(wall.sum(), xg)
        return EnergyForces(energy=out.energy + wall.detach().to(out.energy), forces=out.forces - grad.to(out.forces))
