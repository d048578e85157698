"""Point-cloud geometry: mean-free projection, Kabsch alignment (proper rotations, masks, weights), aligned RMSD."""

from __future__ import annotations

import pytest
import torch

from flowlab.core.geometry import aligned_rmsd, kabsch, kabsch_align, mean_free


def random_rotations(batch: int, dim: int, gen: torch.Generator) -> torch.Tensor:
    """(batch, dim, dim) random proper rotations (QR of Gaussians, signs fixed, det +1)."""
    q, r = torch.linalg.qr(torch.randn(batch, dim, dim, generator=gen, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=1, dim2=2))[:, None]
    q[:, :, 0] *= torch.sign(torch.linalg.det(q))[:, None]
    return q


def moved(x: torch.Tensor, rot: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    return x @ rot.transpose(1, 2) + shift[:, None]


@pytest.mark.parametrize("dim", [2, 3])
def test_kabsch_recovers_a_rigid_motion(dim):
    gen = torch.Generator().manual_seed(dim)
    x = torch.randn(5, 12, dim, generator=gen, dtype=torch.float64)
    rot, shift = random_rotations(5, dim, gen), 3 * torch.randn(5, dim, generator=gen, dtype=torch.float64)
    y = moved(x, rot, shift)
    r_hat, t_hat = kabsch(x, y)
    torch.testing.assert_close(r_hat, rot, atol=1e-10, rtol=0)
    torch.testing.assert_close(t_hat, shift, atol=1e-10, rtol=0)
    torch.testing.assert_close(kabsch_align(x, y), y, atol=1e-10, rtol=0)
    assert float(aligned_rmsd(x, y).max()) < 1e-10
    # float32 in, float32 out, still accurate to 1e-5
    r32, t32 = kabsch(x.float(), y.float())
    assert r32.dtype == t32.dtype == torch.float32
    torch.testing.assert_close(r32.double(), rot, atol=1e-5, rtol=0)
    torch.testing.assert_close(t32.double(), shift, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dim", [2, 3])
def test_a_reflection_gives_the_best_proper_rotation(dim):
    gen = torch.Generator().manual_seed(10 + dim)
    x = torch.randn(4, 9, dim, generator=gen, dtype=torch.float64)
    mirror = torch.eye(dim, dtype=torch.float64)
    mirror[0, 0] = -1
    y = moved(x @ mirror, random_rotations(4, dim, gen), torch.randn(4, dim, generator=gen, dtype=torch.float64))
    rot, _ = kabsch(x, y)
    torch.testing.assert_close(torch.linalg.det(rot), torch.ones(4, dtype=torch.float64))
    torch.testing.assert_close(rot @ rot.transpose(1, 2), torch.eye(dim, dtype=torch.float64).expand(4, dim, dim))
    assert bool((aligned_rmsd(x, y) > 1e-3).all())  # a mirror image cannot be matched by a rotation
    # no proper rotation does better than the one returned
    best = aligned_rmsd(x, y)
    for _ in range(20):
        other = moved(x, random_rotations(4, dim, gen), torch.zeros(4, dim, dtype=torch.float64))
        assert bool((aligned_rmsd(other, y) >= best - 1e-12).all())


def test_masked_padding_is_ignored():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 10, 3, generator=gen, dtype=torch.float64)
    rot, shift = random_rotations(3, 3, gen), torch.randn(3, 3, generator=gen, dtype=torch.float64)
    y = moved(x, rot, shift)
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[0, 6:], mask[1, 4:] = False, False
    junk = 100 * torch.randn(3, 10, 3, generator=gen, dtype=torch.float64)
    x_pad, y_pad = torch.where(mask[..., None], x, junk), torch.where(mask[..., None], y, -junk)
    r_hat, t_hat = kabsch(x_pad, y_pad, mask=mask)
    torch.testing.assert_close(r_hat, rot, atol=1e-10, rtol=0)
    torch.testing.assert_close(t_hat, shift, atol=1e-10, rtol=0)
    assert float(aligned_rmsd(x_pad, y_pad, mask=mask).max()) < 1e-10
    # weights of 0 act as a mask; the masked RMSD of sample 0 equals that of its first 6 points alone
    r_w, _ = kabsch(x_pad, y_pad, weights=mask.double())
    torch.testing.assert_close(r_w, rot, atol=1e-10, rtol=0)
    noisy = y_pad + 0.1 * torch.randn(3, 10, 3, generator=gen, dtype=torch.float64)
    alone = aligned_rmsd(x_pad[:1, :6], noisy[:1, :6])
    torch.testing.assert_close(aligned_rmsd(x_pad, noisy, mask=mask)[:1], alone)


def test_weighted_fit_minimises_the_weighted_error():
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 8, 3, generator=gen, dtype=torch.float64)
    y = x + 0.3 * torch.randn(2, 8, 3, generator=gen, dtype=torch.float64)
    w = torch.rand(2, 8, generator=gen, dtype=torch.float64) + 0.1
    rmsd = aligned_rmsd(x, y, weights=w)
    rot, shift = kabsch(x, y, weights=w)
    for scale in (1e-3, 1e-2):
        bump = random_rotations(2, 3, gen)
        near = torch.linalg.matrix_exp(scale * (bump - bump.transpose(1, 2))) @ rot  # a nearby rotation
        aligned = moved(x, near, shift)
        err = ((w * (aligned - y).square().sum(-1)).sum(1) / w.sum(1)).sqrt()
        assert bool((err >= rmsd - 1e-12).all())


def test_rmsd_is_invariant_to_rotating_either_input():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(4, 7, 3, generator=gen, dtype=torch.float64)
    y = torch.randn(4, 7, 3, generator=gen, dtype=torch.float64)
    base = aligned_rmsd(x, y)
    assert bool((base > 0.1).all())
    for a, b in ((x, y), (y, x)):
        turned = moved(a, random_rotations(4, 3, gen), torch.randn(4, 3, generator=gen, dtype=torch.float64))
        got = aligned_rmsd(turned, b) if a is x else aligned_rmsd(x, turned)
        torch.testing.assert_close(got, base, atol=1e-10, rtol=0)
    torch.testing.assert_close(aligned_rmsd(y, x), base, atol=1e-10, rtol=0)  # symmetric


def test_mean_free_centres_present_points_and_zeroes_padding():
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(3, 5, 3, generator=gen, dtype=torch.float64) + 4
    torch.testing.assert_close(mean_free(x).sum(1), torch.zeros(3, 3, dtype=torch.float64))
    torch.testing.assert_close(mean_free(x), x - x.mean(1, keepdim=True), atol=0, rtol=0)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.bool)
    out = mean_free(x, mask)
    torch.testing.assert_close(out[0, :3], x[0, :3] - x[0, :3].mean(0))
    torch.testing.assert_close(out[1], x[1] - x[1].mean(0))
    assert bool((out[0, 3:] == 0).all()) and bool((out[2] == 0).all())
    torch.testing.assert_close(mean_free(out, mask), out)  # a projection


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mean_free(torch.zeros(4, 3)), "x"),
        (lambda: mean_free(torch.zeros(2, 4, 3, dtype=torch.long)), "x"),
        (lambda: mean_free(torch.zeros(2, 4, 3), torch.ones(2, 4)), "mask"),
        (lambda: mean_free(torch.zeros(2, 4, 3), torch.ones(2, 5, dtype=torch.bool)), "mask"),
        (lambda: kabsch(torch.zeros(2, 4, 3), torch.zeros(2, 5, 3)), "x, y"),
        (lambda: kabsch(torch.zeros(2, 4, 3), [[0.0]]), "y"),
        (lambda: kabsch(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3), weights=torch.ones(2, 3)), "weights"),
        (lambda: aligned_rmsd(torch.zeros(2, 4, 3), torch.zeros(2, 4, 3), mask=torch.ones(2, 4)), "mask"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
