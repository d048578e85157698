"""The figure of a fitted time course (`flowlab cells evaluate --plot` and the benchmarks draw it): the cells
coloured by time with particle trajectories, the learned growth rate at every cell and, where known, the true one.
Drawn through the core's `figure` (Agg canvas, project plot style); the first two embedding dimensions are shown.

The panels' pieces (`trajectory_paths`, `draw_trajectories`, `draw_growth`) are shared with the scanpy-style `pl`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anndata as ad
import numpy as np

from flowlab.biology_dynamics.wfr_fm.data import time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel
from flowlab.core.bench import figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.collections import PathCollection

__all__ = ["plot_fit"]

#: particles drawn as trajectories (evenly spaced cells of the first time point) and output times along them
TRAJECTORIES = 60
GRID = 41
#: scanpy's colour for cells without a value
NA_COLOR = "lightgray"


def trajectory_paths(model: TimeCourseModel, X0: np.ndarray, *, n: int, n_times: int) -> np.ndarray:
    """Positions (n_times, m, d) of m = min(n, n0) particles started from evenly spaced rows of X0: (n0, d) at the
    first fitted time and reported at n_times even times over the fitted range."""
    _, st = model._require_fit()
    rows = np.linspace(0, X0.shape[0] - 1, min(n, X0.shape[0])).round().astype(int)
    grid = np.linspace(st.times[0], st.times[-1], n_times).tolist()
    return model.simulate_points(X0[rows], times=grid).x.cpu().numpy()


def draw_trajectories(ax: Axes, pos: np.ndarray, t: np.ndarray, paths: np.ndarray) -> PathCollection:
    """Cells pos: (n, >=2) coloured by their times t: (n,), and one black line per particle of paths: (K, m, >=2)
    over them (the first two dimensions). Returns the cells' scatter."""
    dots = ax.scatter(pos[:, 0], pos[:, 1], c=t, s=4, alpha=0.3, cmap="viridis")
    for i in range(paths.shape[1]):
        ax.plot(paths[:, i, 0], paths[:, i, 1], color="black", lw=0.5, alpha=0.5)
    return dots


def draw_growth(ax: Axes, pos: np.ndarray, growth: np.ndarray, *, cmap: Any = "plasma") -> PathCollection:
    """Cells pos: (n, >=2) coloured by growth: (n,) with a colour bar; cells whose growth is NaN (outside the fitted
    times) are drawn in light grey beneath. Returns the coloured scatter (its array: the finite growth values)."""
    known = np.isfinite(growth)
    if not known.all():
        ax.scatter(pos[~known, 0], pos[~known, 1], s=4, color=NA_COLOR)
    dots = ax.scatter(pos[known, 0], pos[known, 1], c=growth[known], s=4, cmap=cmap)
    ax.figure.colorbar(dots, ax=ax)
    return dots


def plot_fit(
    model: TimeCourseModel,
    adata: ad.AnnData,
    path: str | os.PathLike[str],
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    true_growth: np.ndarray | None = None,
    title: str = "data by time and trajectories",
) -> Path:
    """Write the PNG `path`: (1) the cells of `adata` by time with the trajectories of 60 particles from the
    first time point over the fitted range, (2) the learned g(t, x) at each cell's own time (cells outside the
    fitted range in grey) and, with `true_growth`: (n_obs,), (3) the true growth. Returns the path."""
    _, st = model._require_fit()
    series = time_series_from_adata(adata, time_key=time_key, use_rep=use_rep)
    if series.dim < 2:
        raise ValueError(f"use_rep: the plot shows two embedding dimensions, {use_rep!r} has {series.dim}")
    if true_growth is not None and np.shape(true_growth) != (adata.n_obs,):
        raise ValueError(f"true_growth: expected shape ({adata.n_obs},), got {np.shape(true_growth)}")
    paths = trajectory_paths(model, series.X[0].numpy(), n=TRAJECTORIES, n_times=GRID)
    pos = np.concatenate([x.numpy() for x in series.X])  # cells grouped by time: (n, d)
    t = np.concatenate([np.full(x.shape[0], v) for v, x in zip(series.times, series.X)])
    growth = np.full(len(t), np.nan)
    for v, x, rows in zip(series.times, series.X, np.split(np.arange(len(t)), np.cumsum(series.counts)[:-1])):
        if st.times[0] <= v <= st.times[-1]:
            growth[rows] = model.growth(x.numpy(), v)
    panels = 2 if true_growth is None else 3
    with figure(path, ncols=panels, size=(6.5 * panels, 5), dpi=90) as (_, axes):
        draw_trajectories(axes[0], pos, t, paths)
        axes[0].set_title(title)
        draw_growth(axes[1], pos, growth)
        axes[1].set_title("learned growth g(t, x)")
        if true_growth is not None:
            draw_growth(axes[2], pos, np.asarray(true_growth, dtype=np.float64)[np.concatenate(series.index)])
            axes[2].set_title("true growth")
        for ax in axes:
            ax.set_xlabel("dim 1")
            ax.set_ylabel("dim 2")
    return Path(path)
