"""The WFR length scale delta from the data: `data_delta`, the typical distance a cell moves between consecutive
times (the default of `flowlab cells fit` and `tl.fit`), and `select_delta`, the candidate whose fit best predicts
held-out cells of the observed times (`--delta auto`).

Why the typical displacement: in the plan (unit masses, KL marginal penalty reg_m = 1) moving a cell over a distance
d costs -log cos^2(d / 2 delta), and removing it and creating it elsewhere costs about 2 (one unit of KL on each
side). Transport is the cheaper explanation up to d of about 2.4 delta, so with delta the median displacement a cell
travels by transport until about 2.4 typical moves, and mass that would have to travel farther (another lineage, a
distant cluster) is explained by growth."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import anndata as ad
import numpy as np
import ot
import torch

from flowlab.biology_dynamics.wfr_fm.data import TimeSeries, fit_series
from flowlab.biology_dynamics.wfr_fm.evaluate import w1
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig, WFRFlowMatching

__all__ = [
    "FROM_DATA",
    "DeltaSelection",
    "data_delta",
    "displacement_lengths",
    "parse_delta",
    "resolve_delta",
    "select_delta",
]


def displacement_lengths(series: TimeSeries, *, max_cells: int = 1000, seed: int = 0) -> list[np.ndarray]:
    """Per interval, (lengths: (k,), masses: (k,)): the distances ||y_j - x_i|| of the pairs of the exact balanced OT
    plan (squared Euclidean cost, uniform weights) between consecutive times and the plan's mass on each, on at most
    `max_cells` cells per side (a seeded subsample)."""
    rng = np.random.default_rng(seed)

    def cells(x: torch.Tensor) -> np.ndarray:
        x = x.double().numpy()
        return x if x.shape[0] <= max_cells else x[rng.choice(x.shape[0], max_cells, replace=False)]

    out = []
    for x0, x1 in zip(series.X[:-1], series.X[1:]):
        a, b = cells(x0), cells(x1)
        dist = ot.dist(a, b, metric="euclidean")
        plan = ot.emd(np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b)), dist**2, numItermax=10_000_000)
        used = plan > 0
        out.append((dist[used], plan[used]))
    return out


def data_delta(series: TimeSeries, *, max_cells: int = 1000, seed: int = 0) -> float:
    """delta = the median distance a cell moves between consecutive times: the plan-mass-weighted median of the
    balanced OT displacements (`displacement_lengths`), each interval weighing equally. Raises ValueError if the
    cells do not move (every displacement zero)."""
    lengths, masses = zip(*displacement_lengths(series, max_cells=max_cells, seed=seed), strict=True)
    length = np.concatenate(lengths)
    weight = np.concatenate([m / m.sum() for m in masses])
    order = np.argsort(length)
    cdf = np.cumsum(weight[order])
    median = float(length[order][np.searchsorted(cdf, cdf[-1] / 2)])
    if not median > 0:
        raise ValueError("delta: the cells do not move between the times (median displacement 0); give --delta")
    return median


@dataclass(frozen=True)
class DeltaSelection:
    """The chosen delta, the data-derived one the candidates scale, and each candidate's held-out mean W1."""

    delta: float
    data_delta: float
    scores: dict[float, float]


def select_delta(
    adata: ad.AnnData,
    config: WFRConfig,
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    factors: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
    held_out: float = 0.2,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> DeltaSelection:
    """Pick delta among `data_delta * factors` on held-out cells: every time point's cells are split once (a
    `held_out` share, seeded), WFR-FM (`config` with each candidate delta) is fitted to the rest, and its particles
    pushed from the fitted first-time cells are scored by W1 against the held-out cells of every later time; the
    lowest mean wins. Only the cells of `adata` are used, so cells scored afterwards must not be in it."""
    if not 0 < held_out < 1:
        raise ValueError(f"held_out: expected a share in (0, 1), got {held_out}")
    if not factors or min(factors) <= 0:
        raise ValueError(f"factors: expected positive scale factors, got {list(factors)}")
    times = np.asarray(adata.obs[time_key], dtype=np.float64)
    rng = np.random.default_rng(seed)
    keep = np.ones(adata.n_obs, dtype=bool)
    for t in np.unique(times):
        rows = np.flatnonzero(times == t)
        n_out = round(held_out * rows.size)
        if n_out < 2 or rows.size - n_out < 2:
            raise ValueError(f"held_out: time {t:g} has {rows.size} cells, too few to hold out a share of {held_out}")
        keep[rng.choice(rows, n_out, replace=False)] = False
    fitted, scored = adata[keep].copy(), fit_series(adata[~keep], time_key=time_key, use_rep=use_rep)
    base = data_delta(fit_series(fitted, time_key=time_key, use_rep=use_rep), seed=seed)
    scores = {}
    for factor in factors:
        delta = base * factor
        model = WFRFlowMatching(replace(config, delta=delta))
        model.fit(fitted, time_key=time_key, use_rep=use_rep, device=device,
                  generator=torch.Generator(device).manual_seed(seed))  # fmt: skip
        start = fit_series(fitted, time_key=time_key, use_rep=use_rep).X[0].numpy()
        traj = model.simulate_points(start, t_from=scored.times[0], times=list(scored.times))
        weights = traj.weights.cpu().numpy()
        scores[delta] = float(np.mean([w1(traj.x[k], scored.X[k], weights[k]) for k in range(1, len(scored.times))]))
    return DeltaSelection(delta=min(scores, key=scores.get), data_delta=base, scores=scores)


#: the named ways to set delta from the data (`resolve_delta`)
FROM_DATA = ("data", "auto")


def parse_delta(value: float | str) -> float | str:
    """A delta setting: a positive number, or one of `FROM_DATA` ("data": `data_delta`, "auto": `select_delta`)."""
    if isinstance(value, str) and value in FROM_DATA:
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (np.isfinite(number) and number > 0):
        raise ValueError(f"delta: expected a positive length scale, {' or '.join(FROM_DATA)}; got {value!r}")
    return number


def resolve_delta(
    value: float | str,
    adata: ad.AnnData,
    config: WFRConfig,
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    hold_out: float | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> tuple[float, DeltaSelection | None]:
    """(delta, the selection for "auto" else None) for a `parse_delta` setting, from the cells a model fitted with
    `hold_out` would see (`config`: the fit's settings, used by "auto")."""
    value = parse_delta(value)
    if not isinstance(value, str):
        return value, None
    series = fit_series(adata, time_key=time_key, use_rep=use_rep, hold_out=hold_out)
    if value == "data":
        return data_delta(series, seed=seed), None
    seen = adata[np.concatenate(series.index)].copy()
    chosen = select_delta(seen, config, time_key=time_key, use_rep=use_rep, seed=seed, device=device)
    return chosen.delta, chosen
