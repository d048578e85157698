"""The figure of a fitted time course (`flowlab cells evaluate --plot` and the benchmarks draw it): the cells
coloured by time with particle trajectories, the learned growth rate at every cell and, where known, the true one.
Drawn through the core's `figure` (Agg canvas, project plot style); the first two embedding dimensions are shown."""

from __future__ import annotations

import os
from pathlib import Path

import anndata as ad
import numpy as np

from flowlab.biology_dynamics.wfr_fm.data import time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel
from flowlab.core.bench import figure

__all__ = ["plot_fit"]

#: particles drawn as trajectories (every k-th cell of the first time point) and output times along them
_TRAJECTORIES = 60
_GRID = 41


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
    """Write the PNG `path`: (1) the cells of `adata` by time with the trajectories of about 60 particles from the
    first time point over the fitted range, (2) the learned g(t, x) at each cell's own time (cells outside the
    fitted range left out) and, with `true_growth`: (n_obs,), (3) the true growth. Returns the path."""
    _, st = model._require_fit()
    series = time_series_from_adata(adata, time_key=time_key, use_rep=use_rep)
    if series.dim < 2:
        raise ValueError(f"use_rep: the plot shows two embedding dimensions, {use_rep!r} has {series.dim}")
    if true_growth is not None and np.shape(true_growth) != (adata.n_obs,):
        raise ValueError(f"true_growth: expected shape ({adata.n_obs},), got {np.shape(true_growth)}")
    x0 = series.X[0][:: max(1, series.X[0].shape[0] // _TRAJECTORIES)].numpy()
    grid = np.linspace(st.times[0], st.times[-1], _GRID).tolist()
    paths = model.simulate_points(x0, times=grid).x.cpu().numpy()  # (grid, particles, d)
    pos = np.concatenate([x.numpy() for x in series.X])  # cells grouped by time: (n, d)
    t = np.concatenate([np.full(x.shape[0], v) for v, x in zip(series.times, series.X)])
    inside = (t >= st.times[0]) & (t <= st.times[-1])
    growth = np.full(len(t), np.nan)
    for v, x, rows in zip(series.times, series.X, np.split(np.arange(len(t)), np.cumsum(series.counts)[:-1])):
        if st.times[0] <= v <= st.times[-1]:
            growth[rows] = model.growth(x.numpy(), v)
    panels = 2 if true_growth is None else 3
    with figure(path, ncols=panels, size=(6.5 * panels, 5), dpi=90) as (fig, axes):
        axes[0].scatter(pos[:, 0], pos[:, 1], c=t, s=4, alpha=0.3, cmap="viridis")
        for i in range(paths.shape[1]):
            axes[0].plot(paths[:, i, 0], paths[:, i, 1], color="black", lw=0.5, alpha=0.5)
        axes[0].set_title(title)
        dots = axes[1].scatter(pos[inside, 0], pos[inside, 1], c=growth[inside], s=4, cmap="plasma")
        fig.colorbar(dots, ax=axes[1])
        axes[1].set_title("learned growth g(t, x)")
        if true_growth is not None:
            truth = np.asarray(true_growth, dtype=np.float64)[np.concatenate(series.index)]
            dots = axes[2].scatter(pos[:, 0], pos[:, 1], c=truth, s=4, cmap="plasma")
            fig.colorbar(dots, ax=axes[2])
            axes[2].set_title("true growth")
        for ax in axes:
            ax.set_xlabel("dim 1")
            ax.set_ylabel("dim 2")
    return Path(path)
