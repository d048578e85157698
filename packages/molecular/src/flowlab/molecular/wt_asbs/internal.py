"""Internal coordinates: a Z-matrix over a molecule's bond graph, the batched map between Cartesian positions and
(bond, angle, torsion) coordinates, and a potential on normalised internal coordinates (the ASBS paper's alanine
dipeptide setting, d = 3N - 6).

    zm = ZMatrix.from_bonds(bonds, n_atoms, root=(8, 6, 14))
    q = zm.to_internal(x)           # x: (B, 3N) nm -> q: (B, 3N - 6): bonds (nm), angles, torsions (rad)
    x = zm.to_cartesian(q)          # the same molecule in the Z-matrix frame (rigid motion removed)
    pot = InternalPotential(openmm_potential, zm, x_ref)    # energy_and_forces(z), z: (B, 3N - 6)

Layout of q: the bond of every placed atom (N - 1), then its angle (N - 2), then its torsion (N - 3), in placing
order. Atom `root[0]` sits at the origin, `root[1]` on +x, `root[2]` in the xy plane; every later atom i is placed
from its reference atoms (j, k, l): |x_i - x_j|, angle(i, j, k), dihedral(i, j, k, l).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from flowlab.molecular.wt_asbs.potentials import EnergyForces, Potential, WrappedPotential

__all__ = [
    "AffineInternalPotential",
    "Coordinates",
    "InternalPotential",
    "ZMatrix",
    "internal_energy",
    "internal_hessian",
]


def _dihedral(p0, p1, p2, p3):
    b0, b1, b2 = p1 - p0, p2 - p1, p3 - p2
    n1, n2 = torch.linalg.cross(b0, b1), torch.linalg.cross(b1, b2)
    y = (torch.linalg.cross(n1, n2) * b1).sum(-1) / b1.norm(dim=-1)
    return torch.atan2(y, (n1 * n2).sum(-1))


def _angle(p0, p1, p2):
    u, v = p0 - p1, p2 - p1
    return torch.atan2(torch.linalg.cross(u, v).norm(dim=-1), (u * v).sum(-1))


class Coordinates(Protocol):
    """A map between Cartesian positions and 3N - 6 internal coordinates (`ZMatrix`, `AxisFrame`)."""

    n_atoms: int

    @property
    def dim(self) -> int:
        """3 N - 6."""
        ...

    def to_internal(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3N) -> q: (B, 3N - 6)."""
        ...

    def to_cartesian(self, q: torch.Tensor) -> torch.Tensor:
        """q: (B, 3N - 6) -> x: (B, 3N) in the coordinates' own frame."""
        ...

    def log_jacobian(self, q: torch.Tensor) -> torch.Tensor:
        """log |dx/dq| up to a constant: (B,)."""
        ...


def internal_energy(potential: Potential, coords: Coordinates, q: torch.Tensor) -> EnergyForces:
    """U(q) = E(x(q)) - kT log |dx/dq| and -dU/dq for q: (B, d), float64; dU/dq = (dE/dx)(dx/dq) - kT dlogJ/dq by
    one vector-Jacobian product (one energy call per configuration)."""
    with torch.enable_grad():
        qg = q.detach().requires_grad_(True)
        x = coords.to_cartesian(qg)
        ef = potential.energy_and_forces(x.detach())
        surrogate = -(ef.forces.to(x) * x).sum() - potential.kT * coords.log_jacobian(qg).sum()
        (grad_q,) = torch.autograd.grad(surrogate, qg)
    energy = ef.energy.to(q) - potential.kT * coords.log_jacobian(q.detach())
    return EnergyForces(energy=energy, forces=-grad_q)


def internal_hessian(potential: Potential, coords: Coordinates, q: torch.Tensor, step: float = 1e-4) -> torch.Tensor:
    """The Hessian of U (kJ/mol per q unit squared) at q: (d,) by central differences of -dU/dq (2 d energy calls),
    symmetrised: (d, d)."""
    d = len(q)
    qs = torch.cat([q + step * torch.eye(d, dtype=q.dtype), q - step * torch.eye(d, dtype=q.dtype)])
    f = internal_energy(potential, coords, qs).forces
    h = -(f[:d] - f[d:]) / (2 * step)
    return (h + h.T) / 2


@dataclass(frozen=True)
class ZMatrix:
    """order: (N,) atoms in placing order (the root first); refs: (N - 3, 3) the (j, k, l) of order[3:];
    n_atoms."""

    order: tuple[int, ...]
    refs: tuple[tuple[int, int, int], ...]
    n_atoms: int

    @classmethod
    def from_bonds(
        cls, bonds: Sequence[tuple[int, int]], n_atoms: int, root: Sequence[int], torsions: Sequence[Sequence[int]] = ()
    ) -> ZMatrix:
        """A Z-matrix that places atoms breadth-first over the bond graph from `root` = (a0, a1, a2), a1 and a2
        bonded to a0. Atom i with parent j is placed from j, j's parent k and, for the first child of j, k's parent
        (a proper torsion); a later child of j takes its first placed sibling instead, so that its torsion is a
        rigid branch angle that does not move when the bond j-k rotates. Children whose proper torsion is one of
        `torsions` (CVs that must be coordinates) are placed first. A ValueError names a disconnected graph, a root
        that is not a bonded triple or a requested torsion that did not become a coordinate."""
        nbrs: dict[int, list[int]] = {i: [] for i in range(n_atoms)}
        for a, b in bonds:
            if not (0 <= a < n_atoms and 0 <= b < n_atoms) or a == b:
                raise ValueError(f"bonds: bond ({a}, {b}) is not between two of the {n_atoms} atoms")
            nbrs[a].append(b)
            nbrs[b].append(a)
        a0, a1, a2 = (int(r) for r in root)
        if len({a0, a1, a2}) != 3 or a1 not in nbrs[a0] or a2 not in nbrs[a0]:
            raise ValueError(f"root: expected three atoms (a0, a1, a2) with a1 and a2 bonded to a0, got {root!r}")
        wanted = {tuple(t) for t in torsions} | {tuple(reversed(tuple(t))) for t in torsions}
        parent = {a1: a0, a2: a0}
        children: dict[int, list[int]] = {a0: [a1, a2]}
        order, queue, refs = [a0, a1, a2], [a0, a1, a2], []

        def proper(i: int, j: int) -> tuple[int, int, int]:
            k = parent.get(j, a1 if j == a0 else a0)
            l_ = parent.get(k, a2 if k != a2 else a1)
            return j, k, l_ if l_ not in (i, j) else next(a for a in order if a not in (i, j, k))

        while queue:
            j = queue.pop(0)
            new = [i for i in sorted(nbrs[j]) if i not in parent and i != a0]
            new.sort(key=lambda i: (i, *proper(i, j)) not in wanted)
            for i in new:
                parent[i] = j
                siblings = children.setdefault(j, [])
                jj, k, l_ = proper(i, j)
                refs.append((jj, k, siblings[0]) if siblings and siblings[0] != k else (jj, k, l_))
                siblings.append(i)
                order.append(i)
                queue.append(i)
        if len(order) != n_atoms:
            missing = sorted(set(range(n_atoms)) - set(order))
            raise ValueError(f"bonds: atoms {missing} are not connected to the root {root!r}")
        zmatrix = cls(tuple(order), tuple(refs), n_atoms)
        for t in torsions:
            zmatrix.torsion_index(t)
        return zmatrix

    @property
    def dim(self) -> int:
        """3 N - 6 internal coordinates."""
        return 3 * self.n_atoms - 6

    def slices(self) -> tuple[slice, slice, slice]:
        """The (bonds, angles, torsions) blocks of q."""
        n = self.n_atoms
        return slice(0, n - 1), slice(n - 1, 2 * n - 3), slice(2 * n - 3, 3 * n - 6)

    def torsion_index(self, torsion: Sequence[int]) -> int:
        """The column of q holding the dihedral of atoms `torsion` (in either direction); a ValueError if this
        Z-matrix has no such coordinate."""
        want = {tuple(torsion), tuple(reversed(tuple(torsion)))}
        for n, (i, (j, k, l_)) in enumerate(zip(self.order[3:], self.refs, strict=True)):
            if (i, j, k, l_) in want:
                return 2 * self.n_atoms - 3 + n
        raise ValueError(f"torsion: {tuple(torsion)} is not a coordinate of this Z-matrix (choose another root)")

    def to_internal(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3N) -> q: (B, 3N - 6) (bonds, angles, torsions; see the module docstring)."""
        a = x.view(x.shape[0], self.n_atoms, 3)
        a0, a1, a2 = self.order[:3]
        bonds = [(a[:, a1] - a[:, a0]).norm(dim=-1), (a[:, a2] - a[:, a0]).norm(dim=-1)]
        angles = [_angle(a[:, a2], a[:, a0], a[:, a1])]
        torsions = []
        for i, (j, k, l_) in zip(self.order[3:], self.refs, strict=True):
            bonds.append((a[:, i] - a[:, j]).norm(dim=-1))
            angles.append(_angle(a[:, i], a[:, j], a[:, k]))
            torsions.append(_dihedral(a[:, i], a[:, j], a[:, k], a[:, l_]))
        return torch.stack(bonds + angles + torsions, dim=-1)

    def to_cartesian(self, q: torch.Tensor) -> torch.Tensor:
        """q: (B, 3N - 6) -> x: (B, 3N) in the Z-matrix frame (NeRF placement, differentiable)."""
        nb, na, _ = self.slices()
        bonds, angles, torsions = q[:, nb], q[:, na], q[:, self.slices()[2]]
        bsz, zero = q.shape[0], q.new_zeros(q.shape[0])
        pos: dict[int, torch.Tensor] = {}
        a0, a1, a2 = self.order[:3]
        pos[a0] = q.new_zeros(bsz, 3)
        pos[a1] = torch.stack([bonds[:, 0], zero, zero], -1)
        th = angles[:, 0]
        pos[a2] = torch.stack([bonds[:, 1] * torch.cos(th), bonds[:, 1] * torch.sin(th), zero], -1)
        for n, (i, (j, k, l_)) in enumerate(zip(self.order[3:], self.refs, strict=True)):
            b, th, ph = bonds[:, n + 2], angles[:, n + 1], torsions[:, n]
            pj, pk, pl = pos[j], pos[k], pos[l_]
            bc = pj - pk
            bc = bc / bc.norm(dim=-1, keepdim=True)
            nrm = torch.linalg.cross(pk - pl, bc)
            nrm = nrm / nrm.norm(dim=-1, keepdim=True)
            m = torch.stack([bc, torch.linalg.cross(nrm, bc), nrm], -1)  # columns
            d = torch.stack([-b * torch.cos(th), b * torch.sin(th) * torch.cos(ph), b * torch.sin(th) * torch.sin(ph)])
            pos[i] = pj + torch.einsum("bxc,cb->bx", m, d)
        return torch.stack([pos[i] for i in range(self.n_atoms)], 1).reshape(bsz, -1)

    def log_jacobian(self, q: torch.Tensor) -> torch.Tensor:
        """log |dx/dq| up to a constant (the rigid-body volume): sum 2 log b + sum log sin(angle); (B,)."""
        nb, na, _ = self.slices()
        return 2 * q[:, nb].log().sum(-1) + q[:, na].sin().log().sum(-1)


class InternalPotential(WrappedPotential):
    """A Cartesian `potential` seen on normalised internal coordinates z = (q - q_ref) / scale (torsions wrapped
    into (-pi, pi] first), dim 3N - 6: U(z) = E(x(q(z))) - kT log |dx/dq|, whose Boltzmann density is the
    Cartesian one's, the rigid motions integrated out.

    scale: (3N - 6,) per-coordinate units: sqrt(kT / H_ii) of the diagonal Hessian of U in q at x_ref, by central
    finite differences (2 (3N - 6) + 1 energy calls), clipped into bounds per block (bonds [1e-4, 0.01] nm, angles
    [0.01, 0.3] rad, torsions `torsion_scale` rad), unless given; `overrides` {column: scale} set single columns
    (a CV's torsion at 1 rad, so that the sampler's noise moves it between basins).
    """

    def __init__(
        self,
        potential: Potential,
        zmatrix: ZMatrix,
        x_ref: torch.Tensor,
        *,
        scale: torch.Tensor | None = None,
        torsion_scale: tuple[float, float] = (0.05, 1.0),
        overrides: Mapping[int, float] | None = None,
    ) -> None:
        if potential.dim != 3 * zmatrix.n_atoms:
            raise ValueError(f"zmatrix: {zmatrix.n_atoms} atoms, potential has D = {potential.dim}")
        self.base, self.zmatrix = potential, zmatrix
        self.kT, self.dim = potential.kT, zmatrix.dim
        self.q_ref = zmatrix.to_internal(x_ref.reshape(1, -1).double())[0]
        self.scale = (self._hessian_scale(torsion_scale) if scale is None else scale.double()).clone()
        for column, value in (overrides or {}).items():
            self.scale[column] = value
        if self.scale.shape != (self.dim,) or not bool((self.scale > 0).all()):
            raise ValueError(f"scale: expected {self.dim} positive values, got shape {tuple(self.scale.shape)}")

    def _hessian_scale(self, torsion_scale: tuple[float, float]) -> torch.Tensor:
        h = torch.tensor([1e-4] * (self.zmatrix.n_atoms - 1) + [1e-3] * (2 * self.zmatrix.n_atoms - 5)).double()
        q = self.q_ref[None].repeat(2 * self.dim + 1, 1)
        q[1 : self.dim + 1] += torch.diag(h)
        q[self.dim + 1 :] -= torch.diag(h)
        u = internal_energy(self.base, self.zmatrix, q).energy
        curv = (u[1 : self.dim + 1] + u[self.dim + 1 :] - 2 * u[0]) / h**2
        std = (self.kT / curv.clamp_min(1e-12)).sqrt()
        nb, na, nt = self.zmatrix.slices()
        for block, (lo, hi) in ((nb, (1e-4, 0.01)), (na, (0.01, 0.3)), (nt, torsion_scale)):
            std[block] = std[block].clamp(lo, hi)
        return std

    def q(self, z: torch.Tensor) -> torch.Tensor:
        """z: (B, 3N - 6) -> q (bonds, angles, torsions wrapped into [-pi, pi)), float64."""
        q = self.q_ref + self.scale * z.double()
        nt = self.zmatrix.slices()[2]
        return torch.cat([q[:, : nt.start], torch.remainder(q[:, nt] + math.pi, 2 * math.pi) - math.pi], -1)

    def z(self, x: torch.Tensor) -> torch.Tensor:
        """Cartesian x: (B, 3N) -> z: (B, 3N - 6), float64 (torsion offsets wrapped into [-pi, pi))."""
        d = self.zmatrix.to_internal(x.double()) - self.q_ref
        nt = self.zmatrix.slices()[2]
        d[:, nt] = torch.remainder(d[:, nt] + math.pi, 2 * math.pi) - math.pi
        return d / self.scale

    def cartesian(self, z: torch.Tensor) -> torch.Tensor:
        """z: (B, 3N - 6) -> positions x: (B, 3N) nm (float64) in the Z-matrix frame."""
        return self.zmatrix.to_cartesian(self.q(z))

    def energy_and_forces(self, z: torch.Tensor) -> EnergyForces:
        """z: (B, 3N - 6) -> U (B,) kJ/mol and -dU/dz (B, 3N - 6), in z's dtype; a non-finite E stays non-finite."""
        if z.dim() != 2 or z.shape[1] != self.dim:
            raise ValueError(f"z: expected shape (B, {self.dim}), got {tuple(z.shape)}")
        ef = internal_energy(self.base, self.zmatrix, self.q(z))
        return EnergyForces(energy=ef.energy.to(z), forces=(ef.forces * self.scale).to(z))


class AffineInternalPotential(WrappedPotential):
    """A Cartesian `potential` seen on affine coordinates z of internal coordinates q = origin + basis z (a basis
    whose first column is a reaction direction and whose others whiten the Hessian, `sn2.internal_system`):
    U(z) = E(x(q(z))) - kT log |dx/dq|, the rigid motions integrated out (the constant log |det basis| dropped).

    coords: the internal coordinates (`AxisFrame`, `ZMatrix` without periodic wrapping); origin: (d,); basis:
    (d, d) invertible.
    """

    def __init__(self, potential: Potential, coords: Coordinates, origin: torch.Tensor, basis: torch.Tensor) -> None:
        d = coords.dim
        if potential.dim != 3 * coords.n_atoms:
            raise ValueError(f"coords: {coords.n_atoms} atoms, potential has D = {potential.dim}")
        if origin.shape != (d,) or basis.shape != (d, d):
            raise ValueError(f"origin, basis: expected shapes ({d},) and ({d}, {d}), got {tuple(origin.shape)}, "
                             f"{tuple(basis.shape)}")  # fmt: skip
        if torch.linalg.matrix_rank(basis.double()) < d:
            raise ValueError("basis: expected an invertible matrix")
        self.base, self.coords, self.kT, self.dim = potential, coords, potential.kT, d
        self.origin, self.basis = origin.double().clone(), basis.double().clone()

    def q(self, z: torch.Tensor) -> torch.Tensor:
        """z: (B, d) -> q: (B, d), float64."""
        return self.origin + z.double() @ self.basis.T

    def z(self, x: torch.Tensor) -> torch.Tensor:
        """Cartesian x: (B, 3N) -> z: (B, d), float64."""
        return torch.linalg.solve(self.basis, (self.coords.to_internal(x.double()) - self.origin).T).T

    def cartesian(self, z: torch.Tensor) -> torch.Tensor:
        """z: (B, d) -> positions x: (B, 3N) nm (float64) in the coordinates' frame."""
        return self.coords.to_cartesian(self.q(z))

    def energy_and_forces(self, z: torch.Tensor) -> EnergyForces:
        """z: (B, d) -> U (B,) kJ/mol and -dU/dz (B, d), in z's dtype; a non-finite E stays non-finite."""
        if z.dim() != 2 or z.shape[1] != self.dim:
            raise ValueError(f"z: expected shape (B, {self.dim}), got {tuple(z.shape)}")
        ef = internal_energy(self.base, self.coords, self.q(z))
        return EnergyForces(energy=ef.energy.to(z), forces=(ef.forces @ self.basis).to(z))
