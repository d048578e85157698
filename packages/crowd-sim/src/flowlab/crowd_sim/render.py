"""Pictures of crowds: a rollout as an animated GIF or PNG frames, rollouts side by side, and the track-over-image
alignment check.

Figures are drawn with matplotlib's object-oriented API on an Agg canvas (no pyplot state, no display needed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch
from matplotlib.animation import PillowWriter
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Polygon

from flowlab.crowd_sim.data import Boxes, Scene, Window, _check_mask

__all__ = ["plot_alignment", "plot_rollouts", "render"]

_OBSTACLE, _INTEREST, _BOUNDARY = "tab:red", "tab:green", "black"
_SIMULATED, _RECORDED = "tab:blue", "tab:orange"
_MARGIN = 1.0  # metres around the tracks when framing a rollout


def render(
    scene: Scene,
    positions: torch.Tensor,
    mask: torch.Tensor,
    path: str | Path,
    *,
    real: torch.Tensor | None = None,
    every: int = 5,
    fps: int = 10,
    trail: int = 10,
) -> Path:
    """Draw a rollout in the scene's metric frame: an animated GIF if `path` ends with ".gif", else a folder of
    PNG frames (`frame_00000.png`, ...).

    positions: (T, P, 2) metres, mask: (T, P) bool (who is drawn at each frame); real: optional (T, P, 2) recorded
    positions under the same mask, drawn in another colour. Every `every`-th frame is drawn, each pedestrian with a
    trail over its last `trail` frames; obstacles, objects of interest and the boundary polyline are drawn under the
    crowd. The view frames the recorded tracks (the simulated ones without `real`).
    """
    _check_rollout(positions, mask, "positions")
    if real is not None:
        if not isinstance(real, torch.Tensor) or real.shape != positions.shape:
            got = tuple(real.shape) if isinstance(real, torch.Tensor) else type(real).__name__
            raise ValueError(f"real: expected the shape of positions {tuple(positions.shape)}, got {got}")
        _check_rollout(real, mask, "real")
    for name, value, least in (("every", every, 1), ("fps", fps, 1), ("trail", trail, 0)):
        if not (isinstance(value, int) and value >= least):
            raise ValueError(f"{name}: expected an integer >= {least}, got {value!r}")
    figure, ax = _figure()
    _draw_scene(ax, scene, _identity)
    crowds = [_Crowd(ax, positions, mask, trail, _SIMULATED, "simulated")]
    if real is not None:
        crowds.append(_Crowd(ax, real, mask, trail, _RECORDED, "recorded"))
    _frame_view(ax, (positions if real is None else real)[mask])
    ax.legend(loc="upper right", fontsize="small")
    frames = range(0, positions.shape[0], every)
    path = Path(path)
    if path.suffix.lower() == ".gif":
        writer = PillowWriter(fps=fps)
        with writer.saving(figure, path, dpi=figure.dpi):
            for t in frames:
                _show(ax, crowds, scene, t)
                writer.grab_frame()
    else:
        path.mkdir(parents=True, exist_ok=True)
        for index, t in enumerate(frames):
            _show(ax, crowds, scene, t)
            figure.savefig(path / f"frame_{index:05d}.png")
    return path


def plot_alignment(scene: Scene, window: Window, path: str | Path) -> Path:
    """The alignment sanity check of spec §6 as a PNG: the recorded tracks of `window` mapped back to pixels with
    `scene.metres_to_pixel` and drawn over the scene image with the annotated boxes and boundary (GC); without an
    image (UCY) the tracks, boxes and boundary are drawn in the scene's metric frame instead."""
    if not isinstance(window, Window):
        raise ValueError(f"window: expected a Window, got {type(window).__name__}")
    figure, ax = _figure()
    if scene.image is None:
        transform, units = _identity, "m"
        boxes = [b.corners.reshape(-1, 2) for b in (scene.obstacles, scene.interests)]
        _frame_view(ax, torch.cat([window.positions[window.mask], *boxes, scene.boundary]))
    else:
        transform, units = scene.metres_to_pixel, "px"
        ax.imshow(scene.image)
        ax.set_xlim(0, scene.image.shape[1])
        ax.set_ylim(scene.image.shape[0], 0)
    _draw_scene(ax, scene, transform)
    tracks = _segments(window.positions, window.mask)
    ax.add_collection(LineCollection(_to_numpy(transform(tracks)), colors=_RECORDED, linewidths=0.6, alpha=0.7))
    ax.set_xlabel(f"x ({units})")
    ax.set_ylabel(f"y ({units})")
    ax.set_title(f"{scene.name} {window.name}: recorded tracks ({scene.frame} frame)", fontsize="medium")
    path = Path(path)
    figure.savefig(path)
    return path


def plot_rollouts(scene: Scene, window: Window, panels: Mapping[str, torch.Tensor], path: str | Path) -> Path:
    """Whole-window tracks side by side as a PNG, one panel per entry of `panels` (title -> positions (T, P, 2),
    e.g. the recording and one replica of each method), drawn under `window.mask` over the scene's obstacles and
    objects of interest, all panels framed on the recorded tracks."""
    if not isinstance(window, Window):
        raise ValueError(f"window: expected a Window, got {type(window).__name__}")
    if not panels:
        raise ValueError("panels: expected at least one (title, positions) entry")
    for title, positions in panels.items():
        if not isinstance(positions, torch.Tensor) or positions.shape != window.positions.shape:
            got = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
            expect = tuple(window.positions.shape)
            raise ValueError(f"panels[{title!r}]: expected the window's positions shape {expect}, got {got}")
    n = len(panels)
    figure = Figure(figsize=(4.5 * n, 4.5), dpi=80, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, n, sharex=True, sharey=True, squeeze=False)[0]
    both = window.mask[1:] & window.mask[:-1]
    pedestrian = both.nonzero()[:, 1].numpy()  # the pedestrian of each segment, for its colour
    for ax, (title, positions) in zip(axes, panels.items(), strict=True):
        _draw_scene(ax, scene, _identity)
        tracks = LineCollection(_to_numpy(_segments(positions.detach().cpu(), window.mask)), linewidths=0.6)
        tracks.set_array(pedestrian % 10)
        tracks.set_cmap("tab10")
        tracks.set_clim(0, 9)
        ax.add_collection(tracks)
        ax.set_title(title, fontsize="medium")
        ax.set_aspect("equal")
    _frame_view(axes[0], window.positions[window.mask])
    path = Path(path)
    figure.savefig(path)
    return path


class _Crowd:
    """The drawn pedestrians of one set of tracks: dots at the current frame and trails behind them."""

    def __init__(self, ax: Axes, positions: torch.Tensor, mask: torch.Tensor, trail: int, colour: str, label: str):
        self.positions, self.mask, self.trail = positions.detach().cpu(), mask.cpu(), trail
        self.dots = ax.scatter(np.zeros(0), np.zeros(0), s=14, color=colour, label=label, zorder=3)
        self.trails = ax.add_collection(LineCollection([], colors=colour, linewidths=1.0, alpha=0.6, zorder=2))

    def show(self, t: int) -> int:
        """Draw frame t; returns the number of pedestrians present."""
        present = self.mask[t]
        self.dots.set_offsets(_to_numpy(self.positions[t, present]))
        lo = max(0, t - self.trail)
        self.trails.set_segments(_to_numpy(_segments(self.positions[lo : t + 1], self.mask[lo : t + 1])))
        return int(present.sum())


def _show(ax: Axes, crowds: list[_Crowd], scene: Scene, t: int) -> None:
    counts = [crowd.show(t) for crowd in crowds]
    ax.set_title(f"{scene.name}: t = {t * scene.time_unit:.2f} s (frame {t}), {counts[0]} pedestrians")


def _segments(positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(S, 2, 2) line segments between consecutive frames where the pedestrian is present at both."""
    both = mask[1:] & mask[:-1]
    return torch.stack([positions[:-1][both], positions[1:][both]], dim=1)


def _draw_scene(ax: Axes, scene: Scene, transform: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Obstacles, objects of interest and the boundary polyline, mapped by `transform` from metres."""
    for boxes, colour, label in ((scene.obstacles, _OBSTACLE, "obstacle"), (scene.interests, _INTEREST, "interest")):
        _draw_boxes(ax, boxes, transform, colour, label)
    if len(scene.boundary):
        u, v = _to_numpy(transform(scene.boundary)).T
        ax.plot(u, v, color=_BOUNDARY, linestyle="--", linewidth=1.0, label="boundary")


def _draw_boxes(ax: Axes, boxes: Boxes, transform: Callable, colour: str, label: str) -> None:
    for index, corners in enumerate(_to_numpy(transform(boxes.corners))):
        ax.add_patch(
            Polygon(corners, closed=True, facecolor=colour, edgecolor=colour, alpha=0.3, label=None if index else label)
        )


def _frame_view(ax: Axes, points: torch.Tensor) -> None:
    """Equal-aspect limits around points (N, 2) with a margin."""
    lo, hi = (points.amin(0), points.amax(0)) if len(points) else (torch.zeros(2), torch.ones(2))
    ax.set_xlim(float(lo[0]) - _MARGIN, float(hi[0]) + _MARGIN)
    ax.set_ylim(float(lo[1]) - _MARGIN, float(hi[1]) + _MARGIN)
    ax.set_aspect("equal")


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(8, 6), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _identity(points: torch.Tensor) -> torch.Tensor:
    return points


def _to_numpy(points: torch.Tensor) -> np.ndarray:
    return points.detach().cpu().double().numpy()


def _check_rollout(positions: torch.Tensor, mask: torch.Tensor, name: str) -> None:
    if not isinstance(positions, torch.Tensor) or positions.dim() != 3 or positions.shape[-1] != 2:
        shape = tuple(positions.shape) if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise ValueError(f"{name}: expected a tensor of shape (T, P, 2), got {shape}")
    _check_mask(mask, positions.shape[:2])
    if not bool(torch.isfinite(positions[mask]).all()):
        raise ValueError(f"{name}: NaN or inf at present entries")
