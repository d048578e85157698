"""Body-frame coordinates around a near-linear axis (the Cl...C...Cl line of an SN2 complex), where a Z-matrix
would be singular: the origin at one atom, z along the axis atoms' difference, and one more atom in the xz plane.

    frame = AxisFrame(origin=0, axis=(1, 2), plane=3, n_atoms=6)
    q = frame.to_internal(x)        # x: (B, 3N) nm -> q: (B, 3N - 6), nm
    x = frame.to_cartesian(q)       # the same molecule in the body frame (rigid motion removed)

Layout of q: (x, y) shared by the two axis atoms, z of the first and of the second axis atom, (x, z) of the plane
atom (x > 0), then (x, y, z) of every other atom in index order. Every coordinate is a length, so Euclidean
geometry in q (a straight reaction path, an orthogonal complement) is meaningful.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["AxisFrame"]


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True)


@dataclass(frozen=True)
class AxisFrame:
    """origin: the atom at the origin; axis: (a, b), the z axis points from a to b; plane: the atom with y = 0 and
    x > 0 (it must stay off the axis); n_atoms."""

    origin: int
    axis: tuple[int, int]
    plane: int
    n_atoms: int

    def __post_init__(self) -> None:
        special = (self.origin, *self.axis, self.plane)
        if len(set(special)) != 4 or not all(0 <= i < self.n_atoms for i in special):
            raise ValueError(f"origin, axis, plane: expected 4 distinct atoms of {self.n_atoms}, got {special}")

    @property
    def dim(self) -> int:
        """3 N - 6 internal coordinates."""
        return 3 * self.n_atoms - 6

    @property
    def others(self) -> tuple[int, ...]:
        """The atoms stored as free (x, y, z), in index order."""
        special = {self.origin, *self.axis, self.plane}
        return tuple(i for i in range(self.n_atoms) if i not in special)

    def to_internal(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3N) -> q: (B, 3N - 6) (see the module docstring)."""
        if x.dim() != 2 or x.shape[1] != 3 * self.n_atoms:
            raise ValueError(f"x: expected shape (B, {3 * self.n_atoms}), got {tuple(x.shape)}")
        a = x.view(len(x), self.n_atoms, 3)
        a = a - a[:, self.origin : self.origin + 1]
        i, j = self.axis
        ez = _unit(a[:, j] - a[:, i])
        h = a[:, self.plane]
        ex = _unit(h - (h * ez).sum(-1, keepdim=True) * ez)
        frame = torch.stack([ex, torch.linalg.cross(ez, ex), ez], 1)  # rows: the body axes
        loc = torch.einsum("bkc,bnc->bnk", frame, a)
        head = [loc[:, i, 0], loc[:, i, 1], loc[:, i, 2], loc[:, j, 2], loc[:, self.plane, 0], loc[:, self.plane, 2]]
        return torch.cat([torch.stack(head, -1), loc[:, list(self.others)].reshape(len(x), -1)], -1)

    def to_cartesian(self, q: torch.Tensor) -> torch.Tensor:
        """q: (B, 3N - 6) -> x: (B, 3N) in the body frame (differentiable)."""
        if q.dim() != 2 or q.shape[1] != self.dim:
            raise ValueError(f"q: expected shape (B, {self.dim}), got {tuple(q.shape)}")
        zero = q.new_zeros(len(q))
        pos = {self.origin: torch.stack([zero, zero, zero], -1)}
        i, j = self.axis
        pos[i] = q[:, 0:3]
        pos[j] = torch.stack([q[:, 0], q[:, 1], q[:, 3]], -1)
        pos[self.plane] = torch.stack([q[:, 4], zero, q[:, 5]], -1)
        rest = q[:, 6:].reshape(len(q), -1, 3)
        pos.update({atom: rest[:, n] for n, atom in enumerate(self.others)})
        return torch.stack([pos[n] for n in range(self.n_atoms)], 1).reshape(len(q), -1)

    def log_jacobian(self, q: torch.Tensor) -> torch.Tensor:
        """log |dx/dq| up to a constant (the rigid-body volume): 2 log(z_b - z_a) + log x_plane; (B,)."""
        return 2 * (q[:, 3] - q[:, 2]).log() + q[:, 4].log()
