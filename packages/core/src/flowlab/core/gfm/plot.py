"""Sample-density plots: a 2-D histogram of samples in a chart of the manifold, with the data points over it.

Charts: S² in longitude/latitude degrees (equirectangular, the earth CSVs' convention), T^d by its first two angles
in radians (the angle-angle plane; all of T²), the Poincaré disk in its own coordinates.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlab.core.gfm.data import sphere_to_latlon
from flowlab.core.manifolds import FlatTorus, PoincareBall, Sphere, wrap
from flowlab.core.manifolds.base import Manifold, check_count
from flowlab.core.validation import check_tensor

__all__ = ["Chart", "DensityPlot", "chart", "plot_density"]


@dataclass(frozen=True)
class Chart:
    """A picture of a manifold in the plane: `coords` maps points (N, ambient_dim) to (N, 2) plane coordinates inside
    `extent` (x_min, x_max, y_min, y_max); `labels`: the two axes."""

    coords: Callable[[torch.Tensor], torch.Tensor]
    extent: tuple[float, float, float, float]
    labels: tuple[str, str]


def _lon_lat(x: torch.Tensor) -> torch.Tensor:
    return sphere_to_latlon(x).flip(-1)


def _angles(x: torch.Tensor) -> torch.Tensor:
    return wrap(x[:, :2])


def _disk(x: torch.Tensor) -> torch.Tensor:
    return x


def chart(manifold: Manifold) -> Chart:
    """The chart `plot_density` draws `manifold` in: S², T^d with d >= 2, or the Poincaré disk (2-D); ValueError
    naming `manifold` for any other."""
    if isinstance(manifold, Sphere) and manifold.dim == 2:
        return Chart(_lon_lat, (-180.0, 180.0, -90.0, 90.0), ("longitude (°)", "latitude (°)"))
    if isinstance(manifold, FlatTorus) and manifold.dim >= 2:
        return Chart(_angles, (-math.pi, math.pi, -math.pi, math.pi), ("θ₁ (rad)", "θ₂ (rad)"))
    if isinstance(manifold, PoincareBall) and manifold.dim == 2:
        r = 1 / math.sqrt(manifold.c)
        return Chart(_disk, (-r, r, -r, r), ("x₁", "x₂"))
    raise ValueError(f"manifold: expected S², T^d with d >= 2 or the Poincaré disk to plot, got {manifold!r}")


def _plane(ch: Chart, manifold: Manifold, x: torch.Tensor, name: str) -> np.ndarray:
    """Points x: (N, ambient_dim), checked -> (N, 2) chart coordinates (float64)."""
    check_tensor(x, name)
    if x.dim() != 2 or x.shape[1] != manifold.ambient_dim:
        raise ValueError(f"{name}: expected shape (N, {manifold.ambient_dim}) on {manifold!r}, got {tuple(x.shape)}")
    return ch.coords(x.detach().cpu().double()).numpy()


@dataclass(frozen=True)
class DensityPlot:
    """The PNG written and the sample counts it shows: counts (bins_y, bins_x), row 0 at the chart's lowest y."""

    path: Path
    counts: np.ndarray


def plot_density(
    samples: torch.Tensor,
    data: torch.Tensor,
    *,
    manifold: Manifold,
    path: str | os.PathLike[str],
    bins: int = 45,
    size: tuple[float, float] | None = None,
    dpi: int = 100,
) -> DensityPlot:
    """Draw the samples (N, ambient_dim) as a 2-D histogram in `chart(manifold)` with the data points (M,
    ambient_dim) as dots over it, and write a PNG of `size` (width, height) inches at `dpi` to `path` (its extension
    must be .png; default size: 4 inches high, 2 + 3 x the chart's width/height wide, so S² is 8 x 4, T^d 5 x 4).
    `bins` cells span the chart's height, as many per unit along its width (S²: 4° cells, 90 x 45)."""
    from flowlab.core.bench import figure

    if Path(path).suffix != ".png":
        raise ValueError(f"path: expected a .png file, got {Path(path).name!r}")
    check_count(bins, "bins")
    ch = chart(manifold)
    x_min, x_max, y_min, y_max = ch.extent
    aspect = (x_max - x_min) / (y_max - y_min)
    shape = (round(bins * aspect), bins)
    xy, dots = _plane(ch, manifold, samples, "samples"), _plane(ch, manifold, data, "data")
    counts, x_edges, y_edges = np.histogram2d(*xy.T, bins=shape, range=[(x_min, x_max), (y_min, y_max)])
    with figure(path, size=size or (2 + 3 * aspect, 4.0), dpi=dpi) as (fig, ax):
        mesh = ax.pcolormesh(x_edges, y_edges, counts.T, cmap="viridis", rasterized=True)
        fig.colorbar(mesh, ax=ax, label="samples per cell", shrink=0.8)
        ax.scatter(*dots.T, s=6, c="red", alpha=0.7, linewidths=0)
        ax.set(xlim=(x_min, x_max), ylim=(y_min, y_max), xlabel=ch.labels[0], ylabel=ch.labels[1], aspect="equal")
        ax.set_title(f"{len(xy)} samples (cells), {len(dots)} data points (red dots)")
        ax.grid(False)
    return DensityPlot(Path(path), counts.T)
