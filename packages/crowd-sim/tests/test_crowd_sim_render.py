"""Crowd pictures: a tiny synthetic scene rendered to a GIF and to PNG frames; the GC alignment plot (skipped without
the data set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from PIL import Image

from flowlab.crowd_sim.data import Boxes, Scene, load_scene
from flowlab.crowd_sim.render import plot_alignment, plot_rollouts, render

ROOT = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))


def tiny_scene() -> Scene:
    square = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])
    return Scene(
        name="tiny",
        time_unit=0.08,
        obstacles=Boxes(square + 2.0, torch.tensor([[2.5, 2.5]]), ("pillar",), ("a pillar",)),
        interests=Boxes(square - 2.0, torch.tensor([[-1.5, -1.5]]), ("kiosk",), ("a kiosk",)),
        boundary=torch.tensor([[-3.0, -3.0], [4.0, -3.0], [4.0, 4.0]]),
        image=None,
        constants={},
        windows={},
        frame="published",
        homography=torch.eye(3, dtype=torch.float64),
    )


def tiny_rollout() -> tuple[torch.Tensor, torch.Tensor]:
    """positions (12, 3, 2), mask (12, 3): three walkers, the third entering at frame 4."""
    t = torch.arange(12.0).view(12, 1, 1) * 0.25
    start = torch.tensor([[-2.0, 0.0], [0.0, -2.0], [1.0, 1.0]])
    heading = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    mask = torch.ones(12, 3, dtype=torch.bool)
    mask[:4, 2] = False
    return start + t * heading, mask


def test_render_gif(tmp_path):
    positions, mask = tiny_rollout()
    path = render(tiny_scene(), positions, mask, tmp_path / "rollout.gif", real=positions + 0.1, every=3, fps=5)
    assert path.stat().st_size > 0
    with Image.open(path) as gif:
        assert gif.n_frames == 4  # frames 0, 3, 6, 9


def test_render_png_frames(tmp_path):
    positions, mask = tiny_rollout()
    positions[~mask] = float("nan")  # absent entries are never drawn
    folder = render(tiny_scene(), positions, mask, tmp_path / "frames", every=5, trail=3)
    frames = sorted(folder.glob("frame_*.png"))
    assert [f.name for f in frames] == ["frame_00000.png", "frame_00001.png", "frame_00002.png"]
    assert all(f.stat().st_size > 0 for f in frames)


def test_render_rejects_bad_arguments(tmp_path):
    positions, mask = tiny_rollout()
    with pytest.raises(ValueError, match="mask"):
        render(tiny_scene(), positions, mask[:, :2], tmp_path / "x.gif")
    with pytest.raises(ValueError, match="real"):
        render(tiny_scene(), positions, mask, tmp_path / "x.gif", real=positions[:, :2])
    with pytest.raises(ValueError, match="every"):
        render(tiny_scene(), positions, mask, tmp_path / "x.gif", every=0)


@pytest.mark.skipif(not (ROOT / "crowds").is_dir(), reason=f"crowds data set not found under {ROOT}")
@pytest.mark.parametrize("scene_name", ["gc", "ucy_students03"])
def test_plot_alignment_on_real_scenes(tmp_path, scene_name):
    scene = load_scene(scene_name, windows="test")
    window = next(iter(scene.windows.values()))
    path = plot_alignment(scene, window, tmp_path / "alignment.png")
    with Image.open(path) as image:
        assert image.size == (800, 600)


def test_plot_rollouts_draws_one_panel_per_entry(tmp_path, crossing):
    panels = {"recorded": crossing.positions, "shifted": crossing.positions + 0.5}
    path = plot_rollouts(tiny_scene(), crossing, panels, tmp_path / "rollouts.png")
    with Image.open(path) as image:
        assert image.size == (720, 360)  # 4.5 in per panel at 80 dpi
    with pytest.raises(ValueError, match="panels"):
        plot_rollouts(tiny_scene(), crossing, {"cut": crossing.positions[:5]}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="panels"):
        plot_rollouts(tiny_scene(), crossing, {}, tmp_path / "x.png")
