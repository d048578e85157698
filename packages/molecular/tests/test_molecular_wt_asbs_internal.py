"""Internal coordinates: the Z-matrix round trip, its Jacobian, the potential on normalised coordinates and the
alanine-dipeptide system built on them."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.molecular.wt_asbs.aldp import PHI, PSI, ROOT, aldp_files, internal_system
from flowlab.molecular.wt_asbs.cvs import PeriodicCoordinateCV, TorsionCV
from flowlab.molecular.wt_asbs.internal import InternalPotential, ZMatrix
from flowlab.molecular.wt_asbs.potentials import OpenMMPotential

# butane-like chain 0-1-2-3 with a branch 4 on atom 1 and 5 on atom 2
CHAIN = [(0, 1), (1, 2), (2, 3), (1, 4), (2, 5)]


@pytest.fixture
def aldp(aldp_root):
    pot = OpenMMPotential(aldp_files(aldp_root)[0], solvent="OBC1", platform="Reference")
    x = pot.positions(aldp_files(aldp_root)[1])
    return pot, x


def _perturbed(x: torch.Tensor, n: int, scale: float = 0.01) -> torch.Tensor:
    return x + scale * torch.randn(n, x.shape[1], generator=torch.Generator().manual_seed(0), dtype=x.dtype)


def test_round_trip_keeps_every_distance_and_coordinate():
    x = torch.randn(5, 18, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    zm = ZMatrix.from_bonds(CHAIN, 6, root=(1, 0, 2))
    q = zm.to_internal(x)
    assert q.shape == (5, 12) and zm.dim == 12
    x2 = zm.to_cartesian(q)
    a, b = x.view(5, 6, 3), x2.view(5, 6, 3)
    torch.testing.assert_close(torch.cdist(b, b), torch.cdist(a, a), atol=1e-12, rtol=0)
    torch.testing.assert_close(zm.to_internal(x2), q, atol=1e-12, rtol=0)
    # the frame: root[0] at the origin, root[1] on +x, root[2] in the xy plane
    assert b[:, 1].abs().max() == 0 and b[:, 0, 1:].abs().max() == 0 and b[:, 2, 2].abs().max() == 0


def test_log_jacobian_is_the_frame_determinant_times_the_rigid_volume():
    """|dx/dq| of the 3N - 6 free Cartesian coordinates of the frame (root[1]'s x, root[2]'s x and y, every later
    atom whole) is b2 prod_{i >= 3} b_i^2 sin(theta_i); the rigid rotations add b1^2 (the sphere of root[1]'s
    direction) and b2 sin(theta_2) (the circle of root[2] about it): log_jacobian = 2 sum log b + sum log sin."""
    zm = ZMatrix.from_bonds(CHAIN, 6, root=(1, 0, 2))
    q = zm.to_internal(torch.randn(1, 18, generator=torch.Generator().manual_seed(2), dtype=torch.float64))[0]
    free = [0, 6, 7, *range(9, 18)]  # atom 0 (= root[1]) x; atom 2 (root[2]) x, y; atoms 3, 4, 5 whole
    jac = torch.autograd.functional.jacobian(lambda v: zm.to_cartesian(v[None])[0][free], q)
    b1, b2, th2 = q[0], q[1], q[5]
    expect = torch.linalg.slogdet(jac).logabsdet + 2 * torch.log(b1) + torch.log(b2 * torch.sin(th2).abs())
    torch.testing.assert_close(zm.log_jacobian(q[None])[0], expect, atol=1e-10, rtol=0)


def test_requested_torsions_are_coordinates_and_branches_are_rigid(aldp):
    pot, x = aldp
    bonds = [(a.index, b.index) for a, b in pot.topology.bonds()]
    zm = ZMatrix.from_bonds(bonds, pot.n_atoms, ROOT, (PHI, PSI))
    xs = _perturbed(x, 4)
    q = zm.to_internal(xs)
    for torsion in (PHI, PSI):
        torch.testing.assert_close(q[:, zm.torsion_index(torsion)], TorsionCV(torsion)(xs), atol=1e-12, rtol=0)
    # turning psi alone moves the C-terminal cap and nothing's geometry inside it: the carbonyl O (a sibling of the
    # NME nitrogen) keeps its distance to that nitrogen's hydrogen
    q2 = q.clone()
    q2[:, zm.torsion_index(PSI)] += 1.0
    a, b = zm.to_cartesian(q).view(4, -1, 3), zm.to_cartesian(q2).view(4, -1, 3)
    torch.testing.assert_close((b[:, 15] - b[:, 17]).norm(dim=-1), (a[:, 15] - a[:, 17]).norm(dim=-1))
    assert float((b[:, 16] - a[:, 16]).norm(dim=-1).min()) > 0.05  # the NME nitrogen moved


def test_bad_graphs_and_roots_are_named():
    with pytest.raises(ValueError, match="not connected"):
        ZMatrix.from_bonds([(0, 1), (1, 2), (3, 4)], 5, root=(1, 0, 2))
    with pytest.raises(ValueError, match="root"):
        ZMatrix.from_bonds(CHAIN, 6, root=(0, 1, 2))
    with pytest.raises(ValueError, match="bond"):
        ZMatrix.from_bonds([(0, 7)], 6, root=(1, 0, 2))
    with pytest.raises(ValueError, match="torsion"):
        ZMatrix.from_bonds(CHAIN, 6, root=(1, 0, 2), torsions=[(0, 1, 5, 3)])


def test_internal_potential_forces_are_minus_the_gradient_and_energies_add_the_jacobian(aldp):
    pot, x = aldp
    ip, cvs = internal_system(pot, x)
    z = 0.3 * torch.randn(3, 60, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ef = ip.energy_and_forces(z)
    xs = ip.cartesian(z)
    expect = pot.energy_and_forces(xs).energy - pot.kT * ip.zmatrix.log_jacobian(ip.zmatrix.to_internal(xs))
    torch.testing.assert_close(ef.energy, expect, atol=1e-6, rtol=0)
    eps = 1e-4
    for col in (0, 30, 45, 59):
        step = torch.zeros_like(z)
        step[:, col] = eps
        fd = -(ip.energy_and_forces(z + step).energy - ip.energy_and_forces(z - step).energy) / (2 * eps)
        torch.testing.assert_close(ef.forces[:, col], fd, atol=1e-4, rtol=1e-4)
    # z -> x -> z is the identity (torsion offsets wrapped), and the CVs read phi and psi off z
    torch.testing.assert_close(ip.z(xs), z, atol=1e-9, rtol=0)
    torch.testing.assert_close(cvs(z)[:, 0], TorsionCV(PHI)(xs), atol=1e-9, rtol=0)
    torch.testing.assert_close(cvs(z)[:, 1], TorsionCV(PSI)(xs), atol=1e-9, rtol=0)
    # every coordinate's unit is its Hessian width, phi and psi 1 rad
    assert float(ip.scale[cvs.cvs[0].index]) == 1.0 and float(ip.scale[: pot.n_atoms - 1].max()) <= 0.01
    with pytest.raises(ValueError, match="z: expected shape"):
        ip.energy_and_forces(torch.zeros(2, 66))
    with pytest.raises(ValueError, match="scale"):
        InternalPotential(pot, ip.zmatrix, x, scale=-torch.ones(60))


def test_periodic_coordinate_cv_wraps_and_has_the_scale_as_jacobian():
    cv = PeriodicCoordinateCV(1, 2.0, 3.0)
    z = torch.tensor([[0.0, 0.0], [0.0, 0.1], [5.0, -2.0]], dtype=torch.float64)
    expect = torch.remainder(torch.tensor([3.0, 3.2, -1.0]) + math.pi, 2 * math.pi) - math.pi
    torch.testing.assert_close(cv(z), expect.double())
    torch.testing.assert_close(cv.jacobian(z), torch.tensor([[0.0, 2.0]] * 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="scale"):
        PeriodicCoordinateCV(0, 0.0, 0.0)
    with pytest.raises(ValueError, match="x: expected"):
        cv(torch.zeros(2, 1))
