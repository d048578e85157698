"""Collective variables of flat configurations x: (B, D), values (B,) and Jacobians (B, D), batched.

Atoms are read from x as x.view(B, -1, 3); toy coordinates directly. `CVSet` stacks several CVs to s: (B, K),
and `CVSet.pullback(x, dV_ds)` gives the forces -(dV/ds)(ds/dx) by one vector-Jacobian product.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

__all__ = ["CVSet", "DistanceCV", "DistanceDifferenceCV", "LinearCV", "MappedCV", "PeriodicCoordinateCV", "TorsionCV"]


def _atoms(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2 or x.shape[1] % 3:
        raise ValueError(f"x: expected shape (B, 3 N) of atom coordinates, got {tuple(x.shape)}")
    return x.view(x.shape[0], -1, 3)


def _check_indices(indices: Sequence[int], n: int, name: str) -> tuple[int, ...]:
    idx = tuple(int(i) for i in indices)
    if len(idx) != n or any(i < 0 for i in idx) or len(set(idx)) != n:
        raise ValueError(f"{name}: expected {n} distinct non-negative atom indices, got {indices!r}")
    return idx


class _CV:
    periodic: bool = False
    period: tuple[float, float] | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def jacobian(self, x: torch.Tensor) -> torch.Tensor:
        """ds/dx: (B, D) by autograd (each sample's CV depends on that sample only)."""
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            (jac,) = torch.autograd.grad(self(xg).sum(), xg)
        return jac


class TorsionCV(_CV):
    """Dihedral angle (radians, in (-pi, pi]) of atoms (i, j, k, l), IUPAC sign convention; periodic."""

    periodic = True
    period = (-math.pi, math.pi)

    def __init__(self, indices: Sequence[int]) -> None:
        self.indices = _check_indices(indices, 4, "indices")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3 N) positions -> the dihedral angle (B,) in (-pi, pi]."""
        a = _atoms(x)
        p0, p1, p2, p3 = (a[:, i] for i in self.indices)
        b0, b1, b2 = p1 - p0, p2 - p1, p3 - p2
        n1, n2 = torch.linalg.cross(b0, b1), torch.linalg.cross(b1, b2)
        y = (torch.linalg.cross(n1, n2) * b1).sum(-1) / b1.norm(dim=-1)
        return torch.atan2(y, (n1 * n2).sum(-1))


class DistanceCV(_CV):
    """Distance |x_i - x_j| between two atoms."""

    def __init__(self, i: int, j: int) -> None:
        self.indices = _check_indices((i, j), 2, "i, j")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3 N) positions -> the distance (B,)."""
        a = _atoms(x)
        return (a[:, self.indices[0]] - a[:, self.indices[1]]).norm(dim=-1)


class DistanceDifferenceCV(_CV):
    """d(i, j) - d(k, l), e.g. the SN2 coordinate d(C-Cl_a) - d(C-Cl_b)."""

    def __init__(self, first: Sequence[int], second: Sequence[int]) -> None:
        self.a, self.b = DistanceCV(*first), DistanceCV(*second)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3 N) positions -> d(i, j) - d(k, l): (B,)."""
        return self.a(x) - self.b(x)


class LinearCV(_CV):
    """w . x for a weight vector w: (D,) (CV = x of a toy is w = e_0)."""

    def __init__(self, w: Sequence[float] | torch.Tensor) -> None:
        self.w = torch.as_tensor(w, dtype=torch.float64).flatten()
        if self.w.numel() == 0 or not bool(torch.isfinite(self.w).all()):
            raise ValueError(f"w: expected a non-empty finite weight vector, got {w!r}")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, D) -> w . x: (B,) in x's dtype."""
        if x.dim() != 2 or x.shape[1] != self.w.numel():
            raise ValueError(f"x: expected shape (B, {self.w.numel()}), got {tuple(x.shape)}")
        return x @ self.w.to(x)


class PeriodicCoordinateCV(_CV):
    """An angle stored as one coordinate of a normalised vector z: wrap(offset + scale * z[:, index]) into [-pi, pi)
    (a torsion of `InternalPotential`'s z); periodic."""

    periodic = True
    period = (-math.pi, math.pi)

    def __init__(self, index: int, scale: float, offset: float) -> None:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"index: expected a non-negative column, got {index!r}")
        if not (math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: expected a positive finite scale, got {scale!r}")
        self.index, self.scale, self.offset = index, float(scale), float(offset)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, D) -> the wrapped angle (B,)."""
        if x.dim() != 2 or x.shape[1] <= self.index:
            raise ValueError(f"x: expected shape (B, D) with D > {self.index}, got {tuple(x.shape)}")
        return torch.remainder(self.offset + self.scale * x[:, self.index] + math.pi, 2 * math.pi) - math.pi


class MappedCV(_CV):
    """A CV of positions read through a map from the sampler's coordinates: cv(to_x(z)) (the SN2 coordinate of an
    `AffineInternalPotential`'s z, with to_x its `cartesian`); periodic as `cv` is."""

    def __init__(self, cv: _CV, to_x: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.cv, self.to_x = cv, to_x
        self.periodic, self.period = cv.periodic, cv.period

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, D) sampler coordinates -> the CV of to_x(x): (B,)."""
        return self.cv(self.to_x(x))


class CVSet:
    """Several CVs as one map s = xi(x): (B, D) -> (B, K), with `periodic` flags and the bias pull-back."""

    def __init__(self, cvs: Sequence[_CV]) -> None:
        if not cvs:
            raise ValueError("cvs: expected at least one collective variable")
        self.cvs = tuple(cvs)
        self.periodic = tuple(cv.periodic for cv in self.cvs)

    def __len__(self) -> int:
        return len(self.cvs)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, D) -> the CVs stacked: (B, K)."""
        return torch.stack([cv(x) for cv in self.cvs], dim=-1)

    def jacobian(self, x: torch.Tensor) -> torch.Tensor:
        """ds/dx: (B, K, D)."""
        return torch.stack([cv.jacobian(x) for cv in self.cvs], dim=1)

    def pullback(self, x: torch.Tensor, grad_s: torch.Tensor) -> torch.Tensor:
        """(dV/ds)^T (ds/dx): (B, D) for grad_s: (B, K), by one vector-Jacobian product."""
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            (out,) = torch.autograd.grad(self(xg), xg, grad_outputs=grad_s.to(x))
        return out
