"""A small synthetic crowd scene shared by the crowd-sim tests (no data files needed)."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.crowd_sim.data import Boxes, Scene, Window


def box(cx: float, cy: float, w: float, h: float, theta: float = 0.0) -> torch.Tensor:
    """Corners (4, 2) of a w x h rectangle centred at (cx, cy), rotated by theta."""
    half = torch.tensor([[-w, -h], [w, -h], [w, h], [-w, h]]) / 2
    c, s = math.cos(theta), math.sin(theta)
    return half @ torch.tensor([[c, s], [-s, c]]) + torch.tensor([cx, cy])


def crossing_window(T: int = 60, P: int = 6, seed: int = 0) -> Window:
    """P pedestrians walking across a 10 m square at ~1.2 m/s with a little curvature, entering at staggered frames."""
    g = torch.Generator().manual_seed(seed)
    start = torch.rand(P, 2, generator=g) * 10
    heading = torch.rand(P, generator=g) * 2 * math.pi
    t = torch.arange(T)[:, None] * 0.08
    turn = 0.1 * torch.randn(P, generator=g)
    angle = heading + turn * t
    velocity = 1.2 * torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)
    positions = start + (velocity * 0.08).cumsum(0)
    mask = torch.zeros(T, P, dtype=torch.bool)
    for p in range(P):
        first, last = (p * 3) % 10, T - 1 - (p * 5) % 12
        mask[first : last + 1, p] = True
    positions = positions * mask[..., None]
    last = torch.tensor([int(mask[:, p].nonzero().max()) for p in range(P)])
    return Window("crossing", positions, mask, positions[last, torch.arange(P)], 0.08, torch.arange(P))


def make_scene(windows: dict | None = None, *, image=None) -> Scene:
    obstacles = Boxes(torch.stack([box(5, 5, 1.0, 2.0, 0.3)]), torch.tensor([[5.0, 5.0]]), ("bench",), ("a bench",))
    interests = Boxes(torch.stack([box(8, 2, 1.0, 1.0)]), torch.tensor([[8.0, 2.0]]), ("kiosk",), ("a kiosk",))
    return Scene(
        name="synthetic",
        time_unit=0.08,
        obstacles=obstacles,
        interests=interests,
        boundary=torch.tensor([[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0]]),
        image=image,
        constants={"max_speed": 2.0, "bright_grid": 40, "bin": 4},
        windows=windows or {"crossing": crossing_window()},
        frame="published",
        homography=torch.tensor([[0.05, 0.0, 0.0], [0.0, -0.05, 10.0], [0.0, 0.0, 1.0]], dtype=torch.float64),
    )


@pytest.fixture
def scene() -> Scene:
    return make_scene()


@pytest.fixture
def make_box():
    return box


@pytest.fixture
def crossing() -> Window:
    return crossing_window()


@pytest.fixture
def scene_factory():
    return make_scene


@pytest.fixture
def window_factory():
    return crossing_window
