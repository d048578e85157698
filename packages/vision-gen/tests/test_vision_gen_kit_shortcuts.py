"""The kit's planted shortcut: a corner dot on exactly the rows asked (every image of the target class), nowhere
else, with bad arguments named."""

from __future__ import annotations

import pytest
import torch

from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.shortcuts import CORNERS, corner_dot, plant_shortcut


def test_plant_shortcut_marks_exactly_the_target_class():
    data = load_digits_images(8, split="val")
    biased = plant_shortcut(data, target=0)
    zeros = data.y == 0
    assert torch.equal(biased.y, data.y)
    assert bool((biased.x[zeros][:, :, :2, :2] == 1).all())
    torch.testing.assert_close(biased.x[~zeros], data.x[~zeros], atol=0, rtol=0)
    torch.testing.assert_close(biased.x[:, :, 2:], data.x[:, :, 2:], atol=0, rtol=0)


@pytest.mark.parametrize("corner", CORNERS)
def test_corner_dot_sits_in_its_corner(corner):
    x = -torch.ones(2, 3, 6, 5)
    out = corner_dot(x, torch.tensor([True, False]), size=2, value=0.5, corner=corner)
    rows = slice(0, 2) if corner.startswith("top") else slice(4, 6)
    cols = slice(0, 2) if corner.endswith("left") else slice(3, 5)
    assert bool((out[0, :, rows, cols] == 0.5).all()) and float(out[0].sum()) == -90 + 4 * 3 * 1.5
    assert torch.equal(out[1], x[1]) and torch.equal(x, -torch.ones(2, 3, 6, 5))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"images": torch.ones(3, 8, 8)}, "images: expected"),
        ({"images": torch.full((1, 1, 8, 8), float("nan"))}, "images: contains NaN"),
        ({"corner": "middle"}, "corner: expected"),
        ({"size": 9}, "size: expected"),
        ({"where": torch.ones(2)}, "where: expected"),
    ],
)
def test_corner_dot_bad_inputs(kwargs, message):
    args = {"images": torch.zeros(2, 1, 8, 8)} | kwargs
    with pytest.raises(ValueError, match=message):
        corner_dot(**args)


def test_plant_shortcut_needs_a_present_class():
    with pytest.raises(ValueError, match="target: expected"):
        plant_shortcut(load_digits_images(8, split="val"), target=10)
