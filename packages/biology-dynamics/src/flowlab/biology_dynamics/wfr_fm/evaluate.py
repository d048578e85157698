"""Evaluation of fitted time-course models: per-time W1 and total-mass error, path action, growth correlation.

W1 is the exact earth mover's distance (`ot.emd2`, Euclidean ground cost) between the observed cells (uniform
weights) and the simulated particles (their masses, normalised); TMV = |Σw_t/Σw_0 − N_t/N_0| / (N_t/N_0) uses the
unnormalised masses. Particles start from every cell of the first time point with weight 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anndata as ad
import numpy as np
import ot
import torch

from flowlab.biology_dynamics.wfr_fm.data import time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel
from flowlab.biology_dynamics.wfr_fm.objective import UnbalancedPlans
from flowlab.biology_dynamics.wfr_fm.sample import simulate_particles

__all__ = [
    "TimePointMetrics",
    "evaluate_time_points",
    "gene_growth_profile",
    "growth_correlation",
    "path_action",
    "static_action",
    "tmv",
    "w1",
    "w1_split_floor",
]


def w1(x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor, weights: np.ndarray | None = None) -> float:
    """Exact W1 between particles x: (n, d) with masses `weights` (normalised here; uniform if None) and cells
    y: (m, d) with uniform weights."""
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    y = np.asarray(y.detach().cpu() if isinstance(y, torch.Tensor) else y, dtype=np.float64)
    a = np.full(x.shape[0], 1.0 / x.shape[0]) if weights is None else np.asarray(weights, np.float64)
    if (a < 0).any() or not a.sum() > 0:
        raise ValueError("weights: expected non-negative masses with a positive total")
    a = a / a.sum()
    b = np.full(y.shape[0], 1.0 / y.shape[0])
    return float(ot.emd2(a, b, ot.dist(x, y, metric="euclidean"), numItermax=10_000_000))


def w1_split_floor(y: np.ndarray | torch.Tensor, *, seed: int = 0) -> float:
    """W1 between two disjoint random halves of the cells y: (m, d): two samples of one law, each of half the
    size. A finite-sample reference for `w1`: a model whose W1 to these cells is near or below it is within the
    metric's sampling noise, where W1 no longer ranks models (nor times them to a target)."""
    y = np.asarray(y.detach().cpu() if isinstance(y, torch.Tensor) else y, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 4:
        raise ValueError(f"y: expected an (m, d) array with at least 4 cells, got shape {y.shape}")
    order = np.random.default_rng(seed).permutation(y.shape[0])
    half = y.shape[0] // 2
    return w1(y[order[:half]], y[order[half : 2 * half]])


def tmv(predicted_ratio: float, true_ratio: float) -> float:
    """Relative total-mass error |predicted − true| / true of the mass ratios M_t / M_0."""
    if not true_ratio > 0:
        raise ValueError(f"true_ratio: expected a positive mass ratio, got {true_ratio!r}")
    return abs(predicted_ratio - true_ratio) / true_ratio


@dataclass(frozen=True)
class TimePointMetrics:
    """Metrics at one observed time: W1, TMV, the predicted and true mass ratios, and whether it was held out."""

    time: float
    w1: float
    tmv: float
    mass_pred: float
    mass_true: float
    held_out: bool


def evaluate_time_points(
    model: TimeCourseModel, adata: ad.AnnData, *, time_key: str = "time", use_rep: str = "X_emb"
) -> list[TimePointMetrics]:
    """Simulate from all cells of the first time point and score every later observed time of `adata`."""
    series = time_series_from_adata(adata, time_key=time_key, use_rep=use_rep)
    _, st = model._require_fit()
    times = [t for t in series.times if st.times[0] <= t <= st.times[-1]]
    traj = model.simulate_points(series.X[0].numpy(), t_from=series.times[0], times=times)
    weights = traj.weights.cpu().numpy()
    rows = []
    for k, t in enumerate(times):
        if k == 0:
            continue
        idx = series.times.index(t)
        ratio_true = series.counts[idx] / series.counts[0]
        ratio_pred = float(weights[k].sum() / weights[0].sum())
        rows.append(
            TimePointMetrics(
                time=float(t),
                w1=w1(traj.x[k], series.X[idx], weights[k]),
                tmv=tmv(ratio_pred, ratio_true),
                mass_pred=ratio_pred,
                mass_true=ratio_true,
                held_out=st.hold_out is not None and bool(np.isclose(t, st.hold_out)),
            )
        )
    return rows


def path_action(model: TimeCourseModel, X0: np.ndarray | torch.Tensor, *, delta: float, steps: int = 100) -> float:
    """∫ Σ_i w_i (½‖v‖² + ½δ² g²) dt / n_0 over the fitted time range in data time units (trapezoid rule on a
    uniform grid of `steps` intervals, particles from X0 with w = 1)."""
    fields, st = model._require_fit()
    device = next(fields.parameters()).device
    x0 = torch.as_tensor(np.asarray(X0), dtype=torch.float32, device=device)
    tau = torch.linspace(0, 1, steps + 1, device=device)
    with torch.inference_mode():
        traj = simulate_particles(fields, x0, tau)
        dens = []
        for k in range(steps + 1):
            t = tau[k].expand(x0.shape[0])
            v, g = fields(x=traj.x[k], t=t), fields.growth(x=traj.x[k], t=t)
            dens.append((traj.weights[k] * (0.5 * v.square().sum(1) + 0.5 * delta**2 * g.square())).sum())
        d = torch.stack(dens).double()
    integral_tau = float(((d[1:] + d[:-1]) / 2).sum() / steps)
    return integral_tau / st.span / x0.shape[0]


def static_action(plans: UnbalancedPlans, times: Sequence[float], n0: int) -> float:
    """The static WFR value Σ_k 2δ² · cost_k / Δt_k / n_0, with cost_k the unbalanced plan's total cost
    (transport + KL penalties) between consecutive times: ½ WFR² per interval, as the reference code reports."""
    dts = np.diff(np.asarray(times, dtype=np.float64))
    return float(sum(2 * plans.delta**2 * c / dt for c, dt in zip(plans.static_cost, dts)) / n0)


def gene_growth_profile(X: np.ndarray) -> np.ndarray:
    """The growth profile x2² / (1 + x2²) (up to a constant) used as ground truth for simulation_gene_data."""
    X = np.asarray(X, dtype=np.float64)
    return X[:, 1] ** 2 / (1 + X[:, 1] ** 2)


def growth_correlation(
    model: TimeCourseModel,
    adata: ad.AnnData,
    true_growth: np.ndarray,
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    within_time: bool = False,
) -> float:
    """Pearson correlation of the learned g(t, x) at every cell (at its own time, within the fitted range) with
    `true_growth`: (n_obs,), pooled over all cells, or with `within_time=True` the mean of the per-time
    correlations (spatial pattern only, insensitive to how the overall rate changes with time)."""
    series = time_series_from_adata(adata, time_key=time_key, use_rep=use_rep)
    _, st = model._require_fit()
    true_growth = np.asarray(true_growth, dtype=np.float64)
    if true_growth.shape != (adata.n_obs,):
        raise ValueError(f"true_growth: expected shape ({adata.n_obs},), got {true_growth.shape}")
    learned, truth = [], []
    for t, x, idx in zip(series.times, series.X, series.index):
        if st.times[0] <= t <= st.times[-1]:
            learned.append(model.growth(x.numpy(), t))
            truth.append(true_growth[idx])
    if within_time:
        return float(np.nanmean([_pearson(g, y) for g, y in zip(learned, truth)]))
    return _pearson(np.concatenate(learned), np.concatenate(truth))


def _pearson(g: np.ndarray, y: np.ndarray) -> float:
    if g.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(g, y)[0, 1])
