"""The corruption kit: identifiability flags against rank checks (the linear map's rank, and the transition matrix
estimated on a finite grid of binary images), seeded samplers, fresh draws, revealed masks, projections and errors."""

from __future__ import annotations

import itertools

import pytest
import torch

from flowlab.vision_gen.kit.corruptions import (
    AvgPool,
    DCTProjection,
    GaussianNoise,
    LinearOperator,
    PixelMask,
    linear_rank,
    make_corruption,
    transition_rank,
)

F64 = torch.float64


def _binary_images(h: int, w: int) -> torch.Tensor:
    """Every binary image (2^(h w), 1, h, w) in {-1, 1}."""
    bits = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=h * w)), dtype=F64)
    return bits.view(-1, 1, h, w)


@pytest.mark.parametrize(
    ("corruption", "identifiable"),
    [
        (GaussianNoise(0.3), True),
        (AvgPool(1), True),
        (AvgPool(2), False),
        (DCTProjection(4), False),
        (LinearOperator(torch.randn(64, 64, generator=torch.Generator().manual_seed(0)), (1, 8, 8), 0.1), True),
        (LinearOperator(torch.randn(40, 64, generator=torch.Generator().manual_seed(0)), (1, 8, 8)), False),
    ],
)
def test_linear_flags_match_the_rank_of_the_map(corruption, identifiable):
    assert corruption.identifiable is identifiable
    assert (linear_rank(corruption, (1, 8, 8)) == 64) is identifiable


def test_flags_match_the_transition_rank_on_a_finite_grid():
    """On binary images the black-box check (rank of r(y | x) estimated by sampling) agrees with the flag: masking
    with the mask observed is injective on laws over the 8 images of 1 x 3 pixels, 2 x 2 pooling is not on the 16
    images of 2 x 2 pixels (5 distinct means), and hiding the mask loses injectivity at p = 1 (nothing observed)."""
    g = torch.Generator().manual_seed(1)
    line, square = _binary_images(1, 3), _binary_images(2, 2)
    assert PixelMask(0.5).identifiable and transition_rank(PixelMask(0.5), line, generator=g) == 8
    assert not AvgPool(2).identifiable and transition_rank(AvgPool(2), square, generator=g) == 5
    assert not PixelMask(1.0).identifiable and transition_rank(PixelMask(1.0), line, generator=g) == 1


def test_samplers_are_seeded_fresh_and_shaped():
    x = torch.rand(16, 1, 8, 8, generator=torch.Generator().manual_seed(2)) * 2 - 1
    for c in (GaussianNoise(0.3), PixelMask(0.5), AvgPool(2, 0.1), DCTProjection(3, 0.1)):
        a = c.sample(x, generator=torch.Generator().manual_seed(3))
        b = c.sample(x, generator=torch.Generator().manual_seed(3))
        assert a.equal(b), c
        g = torch.Generator().manual_seed(4)
        assert not c.sample(x, generator=g).equal(c.sample(x, generator=g)), c  # every call draws afresh
        assert a.shape == (16, c.observation_channels(1), 8, 8) and c.start(a).shape == x.shape


def test_mask_is_revealed_and_applied():
    x = torch.full((4000, 1, 4, 4), 0.7)
    m = PixelMask(0.3)
    y = m.sample(x, generator=torch.Generator().manual_seed(5))
    mask = m.mask(y)
    assert set(mask.unique().tolist()) == {0.0, 1.0}
    assert float(mask.mean()) == pytest.approx(0.7, abs=5 * (0.21 / mask.numel()) ** 0.5)
    torch.testing.assert_close(m.start(y), x * mask)
    assert PixelMask(0.3, reveal_mask=False).sample(x[:2]).shape == (2, 1, 4, 4)


def test_linear_corruptions_project_orthogonally():
    """A^+ A is an orthogonal projection: idempotent, symmetric (<P a, b> = <a, P b>); pooling averages blocks and the
    DCT's first coefficient holds a constant image."""
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(8, 1, 8, 8, generator=g, dtype=F64), torch.randn(8, 1, 8, 8, generator=g, dtype=F64)
    for c in (AvgPool(2), DCTProjection(3), LinearOperator(torch.randn(20, 64, generator=g), (1, 8, 8))):
        pa = c.project(a)
        torch.testing.assert_close(c.project(pa), pa)
        torch.testing.assert_close((pa * b).sum(), (a * c.project(b)).sum())
    block = AvgPool(2).project(a)
    torch.testing.assert_close(block[..., 0, 0], a[..., :2, :2].mean((-1, -2)))
    ones = torch.ones(2, 1, 8, 8, dtype=F64)
    torch.testing.assert_close(DCTProjection(1).project(ones), ones)  # a constant image is the DC coefficient alone


def test_bad_input_names_the_argument():
    x = torch.zeros(2, 1, 8, 8)
    cases = [
        ("sigma", lambda: GaussianNoise(-1.0)),
        ("p", lambda: PixelMask(1.5)),
        ("k", lambda: AvgPool(0)),
        ("keep", lambda: DCTProjection(8).sample(x)),
        ("x", lambda: AvgPool(3).sample(x)),
        ("x", lambda: GaussianNoise(0.1).sample(torch.zeros(2, 8, 8))),
        ("image_shape", lambda: LinearOperator(torch.zeros(3, 10), (1, 3, 3))),
        ("corruption", lambda: make_corruption("blur")),
        ("corruption", lambda: make_corruption("noise", p=0.5)),
        ("draws", lambda: transition_rank(PixelMask(0.5), x, draws=0)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=name):
            call()
