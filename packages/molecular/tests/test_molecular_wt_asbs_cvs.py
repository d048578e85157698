"""WT-ASBS collective variables: torsions, distances, linear CVs and their Jacobians."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.molecular.wt_asbs import CVSet, DistanceCV, DistanceDifferenceCV, TorsionCV
from flowlab.molecular.wt_asbs.cvs import MappedCV


def _random_rotation(g: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))
    return q if torch.det(q) > 0 else -q


@pytest.mark.parametrize(
    "cv",
    [TorsionCV((0, 1, 2, 3)), DistanceCV(0, 2), DistanceDifferenceCV((0, 1), (1, 3))],
    ids=lambda cv: type(cv).__name__,
)
def test_cv_gradient_matches_finite_differences(cv, fd_grad):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 12, generator=g, dtype=torch.float64)
    torch.testing.assert_close(cv.jacobian(x), fd_grad(cv, x), atol=1e-6, rtol=1e-5)


def test_torsion_matches_numpy_and_is_rigid_motion_invariant(numpy_dihedral):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 12, generator=g, dtype=torch.float64)
    ref = [numpy_dihedral(*xi.view(4, 3).numpy()) for xi in x]
    np.testing.assert_allclose(np.degrees(TorsionCV((0, 1, 2, 3))(x).numpy()), ref, atol=0.01)
    rot, shift = _random_rotation(g), torch.randn(3, generator=g, dtype=torch.float64)
    moved = (x.view(4, 4, 3) @ rot.T + shift).view(4, 12)
    np.testing.assert_allclose(np.degrees(TorsionCV((0, 1, 2, 3))(moved).numpy()), ref, atol=0.01)


def test_cvset_pullback_is_the_jacobian_transpose_product():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3, 12, generator=g, dtype=torch.float64)
    cvs = CVSet([TorsionCV((0, 1, 2, 3)), DistanceCV(1, 3)])
    w = torch.randn(3, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(cvs.pullback(x, w), torch.einsum("bk,bkd->bd", w, cvs.jacobian(x)))


def test_mapped_cv_reads_a_positional_cv_through_the_map_with_its_jacobian(fd_grad):
    """MappedCV(cv, f)(z) = cv(f(z)), its Jacobian by the chain rule (checked against finite differences), and the
    periodicity of the CV it wraps."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(12, 12, generator=g, dtype=torch.float64)

    def to_x(z: torch.Tensor) -> torch.Tensor:
        return torch.tanh(z @ a.T)

    dd = DistanceDifferenceCV((0, 1), (1, 3))
    mapped = MappedCV(dd, to_x)
    z = torch.randn(4, 12, generator=g, dtype=torch.float64)
    torch.testing.assert_close(mapped(z), dd(to_x(z)))
    torch.testing.assert_close(mapped.jacobian(z), fd_grad(mapped, z), atol=1e-6, rtol=1e-5)
    assert not mapped.periodic and MappedCV(TorsionCV((0, 1, 2, 3)), to_x).periodic
