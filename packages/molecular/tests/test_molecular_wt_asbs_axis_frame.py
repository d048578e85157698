"""The body frame around a near-linear axis (the SN2 complex's coordinates): round trip, Jacobian, and the potential
on affine coordinates built on it."""

from __future__ import annotations

import pytest
import torch

from flowlab.molecular.wt_asbs.axis_frame import AxisFrame
from flowlab.molecular.wt_asbs.internal import AffineInternalPotential
from flowlab.molecular.wt_asbs.potentials import EnergyForces

FRAME = AxisFrame(origin=0, axis=(1, 2), plane=3, n_atoms=6)


def _x(n: int, seed: int) -> torch.Tensor:
    """n configurations around a linear Cl-C-Cl with three H off the axis: (n, 18)."""
    base = torch.tensor([[0, 0, 0], [-0.18, 0, 0], [0.3, 0, 0], [0.03, 0.1, 0], [0.03, -0.05, 0.09],
                         [0.03, -0.05, -0.09]], dtype=torch.float64).reshape(1, -1)  # fmt: skip
    return base + 0.02 * torch.randn(n, 18, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _rotation(w: torch.Tensor) -> torch.Tensor:
    k = torch.zeros(3, 3, dtype=w.dtype)
    k[0, 1], k[0, 2], k[1, 2] = -w[2], w[1], -w[0]
    return torch.matrix_exp(k - k.T)


def test_round_trip_keeps_every_distance_and_the_frame():
    x = _x(7, 0)
    q = FRAME.to_internal(x)
    assert q.shape == (7, 12) and FRAME.dim == 12 and FRAME.others == (4, 5)
    y = FRAME.to_cartesian(q)
    a, b = x.view(7, 6, 3), y.view(7, 6, 3)
    torch.testing.assert_close(torch.cdist(b, b), torch.cdist(a, a), atol=1e-12, rtol=0)
    torch.testing.assert_close(FRAME.to_internal(y), q, atol=1e-12, rtol=0)
    # C at the origin, both Cl on one line parallel to z, the first H in the xz plane with x > 0
    assert b[:, 0].abs().max() == 0 and (b[:, 1, :2] - b[:, 2, :2]).abs().max() == 0
    assert b[:, 3, 1].abs().max() == 0 and bool((b[:, 3, 0] > 0).all()) and bool((b[:, 2, 2] > b[:, 1, 2]).all())


def test_log_jacobian_is_the_full_determinant_up_to_the_rigid_volume():
    """log |d x / d(translation, rotation, q)| at the identity rotation differs from log_jacobian(q) by one
    constant over configurations (the Faddeev-Popov factor of the frame is R^2 x_plane)."""
    gaps = []
    for q in FRAME.to_internal(_x(4, 1)):

        def full(p: torch.Tensor) -> torch.Tensor:
            y = FRAME.to_cartesian(p[None, 6:])[0].view(-1, 3)
            return (y @ _rotation(p[3:6]).T + p[:3]).reshape(-1)

        jac = torch.autograd.functional.jacobian(full, torch.cat([torch.zeros(6, dtype=q.dtype), q]))
        gaps.append(float(torch.linalg.slogdet(jac).logabsdet - FRAME.log_jacobian(q[None])[0]))
    assert max(gaps) - min(gaps) < 1e-9


def test_bad_frames_and_shapes_are_named():
    with pytest.raises(ValueError, match="origin, axis, plane"):
        AxisFrame(origin=0, axis=(1, 0), plane=3, n_atoms=6)
    with pytest.raises(ValueError, match="x: expected shape"):
        FRAME.to_internal(torch.zeros(2, 15))
    with pytest.raises(ValueError, match="q: expected shape"):
        FRAME.to_cartesian(torch.zeros(2, 18))


class _Springs:
    """Harmonic springs between every pair of atoms at their reference lengths (kJ/mol, nm): a cheap molecular
    potential that is rigid-motion invariant."""

    kT, dim, n_evals = 2.5, 18, 0

    def __init__(self, x_ref: torch.Tensor) -> None:
        a = x_ref.view(6, 3)
        self.d0 = torch.cdist(a, a)

    def energy_and_forces(self, x: torch.Tensor) -> EnergyForces:
        self.n_evals += len(x)
        with torch.enable_grad():
            xg = x.detach().double().requires_grad_(True)
            a = xg.view(len(x), 6, 3)
            d = (a[:, :, None] - a[:, None]).pow(2).sum(-1).add(1e-12).sqrt()
            e = 500.0 * ((d - self.d0) ** 2).sum((1, 2))
            (g,) = torch.autograd.grad(e.sum(), xg)
        return EnergyForces(energy=e.detach(), forces=-g)


def test_affine_potential_forces_are_minus_the_gradient_and_z_round_trips():
    x_ref = _x(1, 2)
    base = _Springs(x_ref[0])
    q0 = FRAME.to_internal(x_ref)[0]
    basis = 0.01 * torch.eye(12, dtype=torch.float64) + 0.002 * torch.randn(
        12, 12, generator=torch.Generator().manual_seed(3), dtype=torch.float64
    )
    pot = AffineInternalPotential(base, FRAME, q0, basis)
    z = 0.5 * torch.randn(3, 12, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    torch.testing.assert_close(pot.z(pot.cartesian(z)), z, atol=1e-10, rtol=0)
    ef = pot.energy_and_forces(z)
    h = 1e-6
    for k in (0, 5, 11):
        dz = torch.zeros_like(z)
        dz[:, k] = h
        fd = (pot.energy_and_forces(z + dz).energy - pot.energy_and_forces(z - dz).energy) / (2 * h)
        torch.testing.assert_close(-ef.forces[:, k], fd, atol=1e-4, rtol=1e-5)
    # U = E - kT log J: at q0 the springs are relaxed, so U is -kT log J alone
    u0 = pot.energy_and_forces(torch.zeros(1, 12, dtype=torch.float64)).energy
    torch.testing.assert_close(u0, -base.kT * FRAME.log_jacobian(q0[None]), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="invertible"):
        AffineInternalPotential(base, FRAME, q0, torch.zeros(12, 12, dtype=torch.float64))
    with pytest.raises(ValueError, match="z: expected shape"):
        pot.energy_and_forces(torch.zeros(2, 11))
