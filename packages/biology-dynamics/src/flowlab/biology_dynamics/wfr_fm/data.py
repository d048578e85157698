"""Time-course single-cell data as AnnData: CSV loaders for the shared `single_cell` data set and input validation.

An AnnData holds one cell per row, its observation time in `.obs[time_key]` and an embedding in `.obsm[use_rep]`
(or `.X` with use_rep="X"). Cells carry unit mass: the counts per time point carry the growth, so time points are
never subsampled to equal sizes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import torch

from flowlab.datasets import path as data_path

__all__ = [
    "SINGLE_CELL_FILES",
    "TimeSeries",
    "fit_series",
    "load_single_cell",
    "read_time_series_csv",
    "subsample_cells",
    "time_series_from_adata",
]

#: data set name -> file of the shared `single_cell` data set
SINGLE_CELL_FILES = {"emt": "emt.csv", "simulation_gene_data": "simulation_gene_data.csv", "dygen": "dygen.csv"}


def read_time_series_csv(path: str | os.PathLike[str], *, time_col: str = "samples") -> ad.AnnData:
    """Read a `samples,x1..xd` CSV into an AnnData: X and obsm["X_emb"] (n, d) float32, obs["time"] float.

    obs names are "cell<row>" in file order (rows are not reordered).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: time-series CSV not found: {path}")
    frame = pd.read_csv(path)
    if time_col not in frame.columns:
        raise ValueError(f"time_col: column {time_col!r} not in {path.name} (columns {list(frame.columns)})")
    features = [c for c in frame.columns if c != time_col]
    if not features:
        raise ValueError(f"path: {path.name} has no feature columns besides {time_col!r}")
    X = frame[features].to_numpy(dtype=np.float32)
    obs = pd.DataFrame({"time": frame[time_col].to_numpy(dtype=np.float64)}, index=[f"cell{i}" for i in range(len(X))])
    adata = ad.AnnData(X=X, obs=obs, var=pd.DataFrame(index=features))
    adata.obsm["X_emb"] = X.copy()
    adata.uns["source"] = {"file": path.name, "time_col": time_col}
    return adata


def load_single_cell(name: str, root: str | os.PathLike[str] | None = None) -> ad.AnnData:
    """One of the shared time courses ("emt", "simulation_gene_data", "dygen") from `<root>/single_cell/`.

    root defaults to `flowlab.datasets.root()` ($FLOWLAB_DATA); a missing file raises FileNotFoundError naming the
    data set, the file and how to provide it.
    """
    if name not in SINGLE_CELL_FILES:
        raise ValueError(f"name: expected one of {sorted(SINGLE_CELL_FILES)}, got {name!r}")
    adata = read_time_series_csv(data_path("single_cell", SINGLE_CELL_FILES[name], data_root=root))
    adata.uns["source"]["name"] = name
    return adata


def subsample_cells(adata: ad.AnnData, fraction: float, *, time_key: str = "time", seed: int = 0) -> ad.AnnData:
    """The same `fraction` of every time point's cells (at least one each; a seeded draw, file order kept), so the
    counts keep their ratios and the growth; `adata` itself when `fraction` is 1."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction: expected a share in (0, 1], got {fraction}")
    if fraction == 1:
        return adata
    t = obs_times(adata, time_key)
    rng = np.random.default_rng(seed)
    keep = np.zeros(t.shape[0], dtype=bool)
    for v in np.unique(t):
        rows = np.flatnonzero(t == v)
        keep[rng.choice(rows, max(1, round(fraction * rows.size)), replace=False)] = True
    return adata[keep].copy()


@dataclass(frozen=True)
class TimeSeries:
    """Cells grouped by observation time: times (K,) sorted, X[k]: (n_k, d) float32 tensors, index[k]: the
    integer rows of the AnnData each group came from."""

    times: tuple[float, ...]
    X: tuple[torch.Tensor, ...]
    index: tuple[np.ndarray, ...]

    @property
    def dim(self) -> int:
        """The number of features d of every group."""
        return int(self.X[0].shape[1])

    @property
    def counts(self) -> tuple[int, ...]:
        """The number of cells of each observation time, `(n_0, ..., n_{K-1})`."""
        return tuple(int(x.shape[0]) for x in self.X)


def embedding(adata: ad.AnnData, use_rep: str) -> np.ndarray:
    """The (n, d) embedding `adata.obsm[use_rep]` (or `adata.X` for use_rep="X"), checked finite."""
    if not isinstance(adata, ad.AnnData):
        raise ValueError(f"adata: expected an AnnData, got {type(adata).__name__}")
    if use_rep == "X":
        rep = adata.X
    elif use_rep in adata.obsm:
        rep = adata.obsm[use_rep]
    else:
        raise ValueError(f"use_rep: {use_rep!r} not in adata.obsm (keys {list(adata.obsm.keys())}) and not 'X'")
    if hasattr(rep, "toarray"):
        rep = rep.toarray()
    rep = np.asarray(rep, dtype=np.float64)
    if rep.ndim != 2 or rep.shape[0] != adata.n_obs or rep.shape[1] < 1:
        raise ValueError(f"use_rep: expected an (n_obs, d) = ({adata.n_obs}, d) array, got shape {rep.shape}")
    if not np.isfinite(rep).all():
        bad = int((~np.isfinite(rep)).any(1).sum())
        raise ValueError(f"use_rep: adata.obsm[{use_rep!r}] holds NaN/inf values in {bad} cells")
    return rep


def obs_times(adata: ad.AnnData, time_key: str) -> np.ndarray:
    """The (n,) float observation times `adata.obs[time_key]`, checked present, numeric and finite."""
    if not isinstance(adata, ad.AnnData):
        raise ValueError(f"adata: expected an AnnData, got {type(adata).__name__}")
    if time_key not in adata.obs:
        raise ValueError(f"time_key: {time_key!r} not in adata.obs (columns {list(adata.obs.columns)})")
    try:
        t = np.asarray(adata.obs[time_key], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"time_key: adata.obs[{time_key!r}] must be numeric times") from err
    if not np.isfinite(t).all():
        raise ValueError(f"time_key: adata.obs[{time_key!r}] holds NaN/inf times")
    return t


def time_series_from_adata(
    adata: ad.AnnData, *, time_key: str = "time", use_rep: str = "X_emb", exclude: tuple[float, ...] = ()
) -> TimeSeries:
    """Group the cells of `adata` by time (dropping the times in `exclude`); at least two time points must remain."""
    t = obs_times(adata, time_key)
    rep = embedding(adata, use_rep)
    times = [float(v) for v in np.unique(t) if not any(np.isclose(v, e) for e in exclude)]
    if len(times) < 2:
        raise ValueError(
            f"time_key: adata.obs[{time_key!r}] has {len(times)} distinct time point(s) to fit; need at least 2"
        )
    index = tuple(np.flatnonzero(t == v) for v in times)
    X = tuple(torch.from_numpy(rep[i].astype(np.float32)) for i in index)
    return TimeSeries(times=tuple(times), X=X, index=index)


def fit_series(
    adata: ad.AnnData, *, time_key: str = "time", use_rep: str = "X_emb", hold_out: float | None = None
) -> TimeSeries:
    """The time points a model is fitted to: all of `adata`'s but `hold_out`, which must be an interior one."""
    if hold_out is None:
        return time_series_from_adata(adata, time_key=time_key, use_rep=use_rep)
    times = np.unique(obs_times(adata, time_key))
    if not np.isclose(times, hold_out).any():
        raise ValueError(f"hold_out: {hold_out} is not one of the time points {times.tolist()}")
    if np.isclose(hold_out, times.min()) or np.isclose(hold_out, times.max()):
        raise ValueError(f"hold_out: {hold_out} must be an interior time point (not the first or last)")
    return time_series_from_adata(adata, time_key=time_key, use_rep=use_rep, exclude=(float(hold_out),))
