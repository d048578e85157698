"""The WFR length scale delta from the data: `data_delta`, the default of `flowlab cells fit` and `tl.fit`, and
`select_delta`, the candidate whose fit best predicts held-out cells of the observed times (`--delta auto`).

Both start from how far cells move between consecutive times: the displacements of the exact balanced OT pairs. In
the plan (unit masses, KL marginal penalty reg_m = 1) moving a cell over a distance d costs -log cos^2(d / 2 delta)
and removing it and creating it elsewhere about 2, so transport explains moves up to about 2.4 delta and growth the
rest. `delta_candidates` spans half the median move (mostly growth) to the 99th-percentile move (nearly all
transport) in five log-even steps. `data_delta` is the fourth: on the shipped sets at the quick sizes (RESULTS.md)
it is the one fixed position that never falls into the growth-dominated regime (the third gave gene a mean W1 of
1.11 against 0.069), while the median move itself, the first rule tried, gave 1.21 on gene. `select_delta` fits
all five and costs five fits; it matched or beat the fourth on every shipped set."""

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
    "DATA_POSITION",
    "FROM_DATA",
    "DeltaSelection",
    "data_delta",
    "delta_candidates",
    "displacement_lengths",
    "displacement_quantiles",
    "parse_delta",
    "resolve_delta",
    "select_delta",
]


#: the position in `delta_candidates` that `data_delta` takes
DATA_POSITION = 3


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


def displacement_quantiles(
    series: TimeSeries, q: Sequence[float], *, max_cells: int = 1000, seed: int = 0
) -> np.ndarray:
    """(len(q),) quantiles of the distance a cell moves between consecutive times: of the balanced OT displacements
    (`displacement_lengths`) weighted by plan mass, each interval weighing equally."""
    lengths, masses = zip(*displacement_lengths(series, max_cells=max_cells, seed=seed), strict=True)
    length = np.concatenate(lengths)
    weight = np.concatenate([m / m.sum() for m in masses])
    order = np.argsort(length)
    cdf = np.cumsum(weight[order])
    return length[order][np.searchsorted(cdf, np.asarray(q) * cdf[-1]).clip(max=len(length) - 1)]


def delta_candidates(series: TimeSeries, *, count: int = 5, seed: int = 0) -> np.ndarray:
    """(count,) deltas from half the median displacement to its 99th percentile, evenly spaced in log: from
    mostly-growth (a typical move sits near the horizon) to mostly-transport (nearly every move is cheap). Raises
    ValueError if the cells do not move (median displacement 0)."""
    d50, d99 = displacement_quantiles(series, (0.5, 0.99), seed=seed)
    if not d50 > 0:
        raise ValueError("delta: the cells do not move between the times (median displacement 0); give --delta")
    return np.geomspace(d50 / 2, max(d99, d50), count)


def data_delta(series: TimeSeries, *, seed: int = 0) -> float:
    """The default delta: position DATA_POSITION of `delta_candidates`, the 99th-percentile move times
    (d50 / 2 d99)^(1/4) (see the module's note on how it was chosen)."""
    return float(delta_candidates(series, seed=seed)[DATA_POSITION])


@dataclass(frozen=True)
class DeltaSelection:
    """The chosen delta and each candidate's held-out mean W1."""

    delta: float
    scores: dict[float, float]


def select_delta(
    adata: ad.AnnData,
    config: WFRConfig,
    *,
    time_key: str = "time",
    use_rep: str = "X_emb",
    count: int = 5,
    held_out: float = 0.2,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> DeltaSelection:
    """Pick delta among `count` `delta_candidates` on held-out cells: every time point's cells are split once (a
    `held_out` share, seeded), WFR-FM (`config` with each candidate delta) is fitted to the rest, and its particles
    pushed from the fitted first-time cells are scored by W1 against the held-out cells of every later time; the
    lowest mean wins. Only the cells of `adata` are used, so cells scored afterwards must not be in it."""
    if not 0 < held_out < 1:
        raise ValueError(f"held_out: expected a share in (0, 1), got {held_out}")
    if count < 1:
        raise ValueError(f"count: expected at least one candidate, got {count}")
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
    fitted_series = fit_series(fitted, time_key=time_key, use_rep=use_rep)
    candidates = delta_candidates(fitted_series, count=count, seed=seed)
    start = fitted_series.X[0].numpy()
    scores = {}
    for delta in map(float, candidates):
        model = WFRFlowMatching(replace(config, delta=delta))
        model.fit(fitted, time_key=time_key, use_rep=use_rep, device=device,
                  generator=torch.Generator(device).manual_seed(seed))  # fmt: skip
        traj = model.simulate_points(start, t_from=scored.times[0], times=list(scored.times))
        weights = traj.weights.cpu().numpy()
        scores[delta] = float(np.mean([w1(traj.x[k], scored.X[k], weights[k]) for k in range(1, len(scored.times))]))
    return DeltaSelection(delta=min(scores, key=scores.get), scores=scores)


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
