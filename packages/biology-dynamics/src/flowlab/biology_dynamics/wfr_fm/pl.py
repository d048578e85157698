"""scanpy-style plots of a WFR-FM fit (`pl.velocity_embedding`, `pl.growth`, `pl.trajectories`): each draws into
`ax` (a new pyplot figure when None), shows nothing and returns the Axes.

    from flowlab.biology_dynamics.wfr_fm import pl, tl

    result = tl.fit(adata, time_key="day", use_rep="X_pca")
    pl.velocity_embedding(adata, use_rep="X_pca", color="day")

The coordinates are the first two columns of `obsm[basis]` (scanpy's short names work: basis="umap" is
obsm["X_umap"]) or, without a basis, of `obsm[use_rep]`. matplotlib is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anndata as ad
import numpy as np
import pandas as pd

from flowlab.biology_dynamics.wfr_fm.data import embedding, obs_times
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel
from flowlab.biology_dynamics.wfr_fm.plot import (
    GRID,
    NA_COLOR,
    TRAJECTORIES,
    draw_growth,
    draw_trajectories,
    trajectory_paths,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["growth", "trajectories", "velocity_embedding"]


def _axes(ax: Axes | None) -> Axes:
    """`ax`, checked to be a matplotlib Axes, or the Axes of a new pyplot figure when None."""
    from matplotlib.axes import Axes

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    if not isinstance(ax, Axes):
        raise ValueError(f"ax: expected a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _basis_key(adata: ad.AnnData, basis: str) -> str:
    """The obsm key `basis` names: itself, or scanpy's f"X_{basis}"."""
    for name in (basis, f"X_{basis}"):
        if name in adata.obsm:
            return name
    raise ValueError(f"basis: neither {basis!r} nor 'X_{basis}' is in adata.obsm (keys {list(adata.obsm.keys())})")


def _coordinates(adata: ad.AnnData, basis: str | None, use_rep: str) -> tuple[np.ndarray, str]:
    """The cells' plot coordinates (n, 2) and the obsm key (or "X") they came from: the first two columns of
    obsm[basis] if a basis is given, else of the embedding use_rep (checked finite; "X" is adata.X)."""
    if not isinstance(adata, ad.AnnData):
        raise ValueError(f"adata: expected an AnnData, got {type(adata).__name__}")
    if basis is None:
        arg, name, rep = "use_rep", use_rep, embedding(adata, use_rep)
    else:
        arg, name = "basis", _basis_key(adata, basis)
        rep = np.asarray(adata.obsm[name], dtype=np.float64)
    if rep.ndim != 2 or rep.shape[1] < 2:
        raise ValueError(f"{arg}: expected an embedding of at least 2 dimensions, {name!r} has shape {rep.shape}")
    return rep[:, :2], name


def _velocity(adata: ad.AnnData, key: str, drawn_on: str, arg: str) -> np.ndarray:
    """obsm[f"velocity_{key}"]: (n, d), checked present and in the space of the drawn embedding `drawn_on` (the
    representation `tl.fit` recorded in uns[key]["use_rep"], where recorded; a mismatch names the argument `arg`)."""
    name = f"velocity_{key}"
    if name not in adata.obsm:
        raise ValueError(f"key: adata.obsm has no {name!r}; run tl.fit(adata, ..., key_added={key!r}) first")
    velocity = np.asarray(adata.obsm[name], dtype=np.float64)
    if velocity.ndim != 2 or velocity.shape[1] < 2:
        raise ValueError(f"key: expected adata.obsm[{name!r}] of shape (n_obs, d >= 2), got {velocity.shape}")
    meta = adata.uns.get(key)
    fitted = meta.get("use_rep", drawn_on) if isinstance(meta, Mapping) else drawn_on
    if fitted != drawn_on:
        raise ValueError(
            f"{arg}: the velocities of key {key!r} live in {fitted!r} (adata.uns[{key!r}]['use_rep']), not in "
            f"{drawn_on!r}; projecting them onto another embedding is not supported: draw with use_rep={fitted!r}"
        )
    return velocity


def _palette(adata: ad.AnnData, color: str) -> tuple[pd.Categorical, list[str]]:
    """obs[color] as categories and one colour per category: scanpy's uns[f"{color}_colors"] where it has one per
    category, else matplotlib's cycle "C0".."C9"."""
    values = pd.Categorical(adata.obs[color])
    stored = list(adata.uns.get(f"{color}_colors", []))
    if len(stored) == len(values.categories):
        return values, stored
    return values, [f"C{i % 10}" for i in range(len(values.categories))]


def _arrow_colors(adata: ad.AnnData, color: str | None, rows: np.ndarray) -> np.ndarray | list[str] | str:
    """The colours of the arrows of the cells `rows` by obs[color]: "black" for None, the values (m,) of a numeric
    column (for the colour map), one colour per arrow by category (`_palette`) otherwise."""
    if color is None:
        return "black"
    if color not in adata.obs:
        raise ValueError(f"color: {color!r} not in adata.obs (columns {list(adata.obs.columns)})")
    values = adata.obs[color]
    if pd.api.types.is_numeric_dtype(values) and not isinstance(values.dtype, pd.CategoricalDtype):
        return np.asarray(values, dtype=np.float64)[rows]
    categories, palette = _palette(adata, color)
    return [palette[c] for c in categories.codes[rows]]


def _legend(ax: Axes, adata: ad.AnnData, color: str) -> None:
    """A legend of the categories of obs[color] in their `_palette` colours."""
    from matplotlib.lines import Line2D

    values, palette = _palette(adata, color)
    handles = [Line2D([], [], color=c, marker="o", ls="", label=str(v)) for v, c in zip(values.categories, palette)]
    ax.legend(handles=handles, title=color, loc="best", fontsize="small")


def velocity_embedding(
    adata: ad.AnnData,
    *,
    key: str = "wfr_fm",
    basis: str | None = None,
    use_rep: str = "X_emb",
    color: str | None = None,
    ax: Axes | None = None,
    scale: float | None = None,
    cmap: Any = "viridis",
) -> Axes:
    """Arrows of the learned velocity obsm[f"velocity_{key}"]: (n, d) at the cells' 2-D coordinates, over the cells
    in light grey.

    The coordinates are the first two columns of obsm[basis] (or, without a basis, of obsm[use_rep]); the arrows
    are the velocity's first two components, the same two axes: the velocity projected onto them when the
    embedding has more than two dimensions. The velocity lives in the representation `tl.fit` was given (recorded
    in `uns[key]["use_rep"]`), so the drawn embedding must be that one; cells with NaN velocity (outside the fitted
    times) get no arrow. `color`: an obs column (numbers through `cmap` with a colour bar, categories with a
    legend); `scale`: velocity per unit of arrow length in data units (1 draws the move over one unit of data time;
    None lets matplotlib choose)."""
    pos, drawn_on = _coordinates(adata, basis, use_rep)
    velocity = _velocity(adata, key, drawn_on, "use_rep" if basis is None else "basis")
    rows = np.flatnonzero(np.isfinite(velocity).all(axis=1))
    colors = _arrow_colors(adata, color, rows)
    numeric = isinstance(colors, np.ndarray)
    ax = _axes(ax)
    ax.scatter(pos[:, 0], pos[:, 1], s=4, color=NA_COLOR)
    xy_uv = (pos[rows, 0], pos[rows, 1], velocity[rows, 0], velocity[rows, 1])
    args, style = ((*xy_uv, colors), {"cmap": cmap}) if numeric else (xy_uv, {"color": colors})
    arrows = ax.quiver(*args, **style, angles="xy", scale_units="xy", scale=scale)
    if numeric:
        ax.figure.colorbar(arrows, ax=ax, label=color)
    elif color is not None:
        _legend(ax, adata, color)
    ax.set_title(f"velocity_{key}")
    return ax


def growth(
    adata: ad.AnnData,
    *,
    key: str = "wfr_fm",
    basis: str | None = None,
    use_rep: str = "X_emb",
    ax: Axes | None = None,
    cmap: Any = "plasma",
) -> Axes:
    """The cells at their 2-D coordinates (obsm[basis], else obsm[use_rep]; the first two columns) coloured by the
    learned growth rate obs[f"growth_{key}"]: (n,) through `cmap`, with a colour bar; cells with NaN growth (outside
    the fitted times) in light grey. Any embedding will do: growth is one number per cell."""
    pos, _ = _coordinates(adata, basis, use_rep)
    name = f"growth_{key}"
    if name not in adata.obs:
        raise ValueError(f"key: adata.obs has no {name!r}; run tl.fit(adata, ..., key_added={key!r}) first")
    ax = _axes(ax)
    draw_growth(ax, pos, np.asarray(adata.obs[name], dtype=np.float64), cmap=cmap)
    ax.set_title(name)
    return ax


def _first_cells(model: TimeCourseModel, rep: np.ndarray, t: np.ndarray, *, time_key: str, use_rep: str) -> np.ndarray:
    """The rows (n0, d) of the embedding rep: (n, d) whose times t: (n,) are the model's first fitted time, with the
    model checked fitted and in rep's dimension."""
    if not isinstance(model, TimeCourseModel) or model.state is None or model.fields is None:
        raise ValueError(f"model: expected a fitted TimeCourseModel (tl.fit(...).model), got {type(model).__name__}")
    if rep.shape[1] < 2:
        raise ValueError(f"use_rep: expected an embedding of at least 2 dimensions, {use_rep!r} has 1")
    if rep.shape[1] != model.state.dim:
        dims = f"{model.state.dim} dimensions, {use_rep!r} has {rep.shape[1]}"
        raise ValueError(f"use_rep: the model was fitted in {dims}")
    first = model.state.times[0]
    rows = np.isclose(t, first)
    if not rows.any():
        raise ValueError(f"time_key: no cell of adata.obs[{time_key!r}] is at the model's first fitted time {first}")
    return rep[rows]


def _count(value: Any, least: int, name: str, what: str) -> int:
    """`value` as an int, checked to be an integer >= least (an error names the argument `name`)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
        raise ValueError(f"{name}: expected an integer number of {what} >= {least}, got {value!r}")
    return int(value)


def trajectories(
    model: TimeCourseModel,
    adata: ad.AnnData,
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    n: int = TRAJECTORIES,
    n_times: int = GRID,
    ax: Axes | None = None,
) -> Axes:
    """Paths of min(n, n0) particles pushed by `model` (`simulate_points`) from evenly chosen cells of the n0 at its
    first fitted time, reported at n_times even times over the fitted range: one black line (n_times points) per
    particle over the cells of `adata` coloured by obs[time_key] (colour bar), in the first two dimensions of
    obsm[use_rep] (the embedding the model was fitted in)."""
    rep, t = embedding(adata, use_rep), obs_times(adata, time_key)
    X0 = _first_cells(model, rep, t, time_key=time_key, use_rep=use_rep)
    n, n_times = _count(n, 1, "n", "particles"), _count(n_times, 2, "n_times", "output times")
    ax = _axes(ax)
    paths = trajectory_paths(model, X0, n=n, n_times=n_times)
    dots = draw_trajectories(ax, rep, t, paths)
    ax.figure.colorbar(dots, ax=ax, label=time_key)
    ax.set_title(f"{type(model).__name__} trajectories")
    return ax
