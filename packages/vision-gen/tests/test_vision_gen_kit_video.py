"""Moving digits: shapes and range, conserved digit mass, bouncing constant-velocity motion, seeding, bad inputs."""

from __future__ import annotations

import pytest
import torch

from flowlab.vision_gen.kit.data import load_digits_images, to_unit
from flowlab.vision_gen.kit.video import moving_digits


def _clips(seed: int = 0, **kwargs):
    return moving_digits(kwargs.pop("n", 32), generator=torch.Generator().manual_seed(seed), **kwargs)


def test_shapes_dtypes_and_range():
    v = _clips(n=5, frames=6, size=20, digits=3)
    assert len(v) == 5
    assert v.x.shape == (5, 6, 1, 20, 20) and v.x.dtype == torch.float32
    assert v.y.shape == (5, 3) and v.y.dtype == torch.long and bool(((v.y >= 0) & (v.y <= 9)).all())
    assert v.positions.shape == (5, 6, 3, 2) and v.positions.dtype == torch.long
    assert float(v.x.min()) == -1.0 and float(v.x.max()) <= 1.0
    big = moving_digits(2, digit_size=16, size=24, generator=torch.Generator())
    assert big.x.shape == (2, 8, 1, 24, 24) and int(big.positions.max()) <= 8


def test_single_digit_keeps_its_mass_and_lives_in_its_box():
    v = _clips(n=24, frames=10, size=18)
    x = to_unit(v.x[:, :, 0])  # (N, F, S, S) in [0, 1]
    mass = x.sum(dim=(2, 3))
    assert bool((mass > 5).all())
    assert torch.allclose(mass, mass[:, :1].expand_as(mass), atol=1e-4)
    for i in range(len(v)):
        glyph = None
        for f in range(10):
            r, c = v.positions[i, f, 0]
            box = x[i, f, r : r + 8, c : c + 8]
            assert torch.allclose(box.sum(), mass[i, f], atol=1e-4)  # nothing outside the digit's box
            glyph = box if glyph is None else glyph
            assert torch.allclose(box, glyph, atol=1e-6)  # the same digit in every frame, moved
    assert (v.positions[:, 1:] != v.positions[:, :-1]).any()


def test_positions_are_constant_velocity_reflected_inside_the_frame():
    size, digit, frames = 15, 8, 12
    v = _clips(n=40, frames=frames, size=size, digits=2, max_speed=3)
    p = v.positions
    limit = size - digit
    assert int(p.min()) >= 0 and int(p.max()) <= limit
    # every (clip, digit, axis) track is reflect(p0 + v t) for one integer velocity 1 <= |v| <= 3
    t = torch.arange(frames)
    track = p.permute(0, 2, 3, 1).reshape(-1, frames)  # (tracks, F)
    found = torch.zeros(len(track), dtype=torch.bool)
    for vel in (-3, -2, -1, 1, 2, 3):
        q = torch.remainder(track[:, :1] + vel * t, 2 * limit)
        found |= (torch.where(q > limit, 2 * limit - q, q) == track).all(dim=1)
    assert bool(found.all())
    steps = (p[:, 1:] - p[:, :-1]).abs()
    assert bool((steps <= 3).all()) and bool((steps > 0).any())
    bounced = ((p == 0) | (p == limit))[:, 1:-1].any()
    assert bool(bounced)


def test_overlapping_digits_composite_by_max_against_a_naive_render():
    n, size = 12, 11
    v = _clips(7, n=n, digits=3, size=size, frames=5)
    pool = load_digits_images(8, split="train", value_range=(0.0, 1.0))
    pick = torch.randint(len(pool), (n, 3), generator=torch.Generator().manual_seed(7))  # the generator's first draw
    assert torch.equal(v.y, pool.y[pick])
    want = torch.zeros(n, 5, size, size)
    for i in range(n):
        for f in range(5):
            for d in range(3):
                r, c = v.positions[i, f, d]
                box = want[i, f, r : r + 8, c : c + 8]
                torch.maximum(box, pool.x[pick[i, d], 0], out=box)
    assert torch.allclose(to_unit(v.x[:, :, 0]), want, atol=1e-6)


def test_seeded_reproducibility():
    a, b, c = _clips(3, n=6, digits=2), _clips(3, n=6, digits=2), _clips(4, n=6, digits=2)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and torch.equal(a.positions, b.positions)
    assert not torch.equal(a.x, c.x)


def test_digit_filling_the_frame_stays_put():
    v = _clips(n=3, size=8, frames=4)
    assert int(v.positions.abs().max()) == 0
    assert torch.equal(v.x, v.x[:, :1].expand_as(v.x))


_G = torch.Generator()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n"),
        ({"n": True}, "n"),
        ({"frames": 0}, "frames"),
        ({"digits": 0}, "digits"),
        ({"size": 7}, "size"),
        ({"size": 20, "digit_size": 12}, "digit_size"),
        ({"size": 32, "digit_size": 32.0}, "digit_size"),
        ({"split": "holdout"}, "split"),
        ({"max_speed": 0}, "max_speed"),
        ({"generator": 0}, "generator"),
    ],
)
def test_bad_inputs_are_rejected(kwargs, match):
    args = {"n": 2, "generator": _G, **kwargs}
    with pytest.raises(ValueError, match=rf"^{match}: "):
        moving_digits(args.pop("n"), **args)
