"""W1 against training time: the callback that records it during a fit, the steps it scores, and the time a
curve takes to reach a target (the speed-up of WFR-FM over the simulation-trained neural ODEs)."""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch

from flowlab.biology_dynamics.wfr_fm.data import TimeSeries
from flowlab.biology_dynamics.wfr_fm.evaluate import w1
from flowlab.biology_dynamics.wfr_fm.sample import simulate_particles

__all__ = ["W1Tracker", "curve_steps", "time_to"]


class W1Tracker:
    """Callback: at the given steps, mean W1 over the training times of the (EMA) fields, against training wall
    time with the evaluation's own time excluded. It scores what the final evaluation scores (particles from every
    cell of the first time, the same adaptive solver): a subsample's finite-sample W1 floor would hide the fields'
    progress (200 of gene's 400 cells gave 0.108 for fields the full evaluation puts at 0.054).

    `points`: (seconds, mean W1) per scored step; `eval_seconds`: the time spent scoring."""

    def __init__(self, series: TimeSeries, steps: frozenset[int]) -> None:
        self.series, self.steps = series, steps
        self.x0 = series.X[0]
        t = np.asarray(series.times)
        self.tau = torch.tensor((t - t[0]) / (t[-1] - t[0]), dtype=torch.float32)
        self.start = time.perf_counter()
        self.eval_seconds = 0.0
        self.points: list[tuple[float, float]] = []

    def __call__(self, info: Any) -> None:
        """At a tracked step, scores the fields and appends `(training seconds, mean W1)` to `points`; does nothing
        at other steps."""
        if info.step not in self.steps:
            return
        begin = time.perf_counter()
        fields = info.model
        with torch.no_grad(), info.ema.swap() if info.ema is not None else nullcontext():
            dev = next(fields.parameters()).device
            traj = simulate_particles(fields, self.x0.to(dev), self.tau.to(dev))
            ws = traj.weights.cpu().numpy()
            value = float(np.mean([w1(traj.x[k], self.series.X[k], ws[k]) for k in range(1, len(self.tau))]))
        self.eval_seconds += time.perf_counter() - begin
        self.points.append((time.perf_counter() - self.start - self.eval_seconds, value))


def time_to(points: list[tuple[float, float]], target: float) -> float:
    """The first time of `points` (seconds, value) whose value is at or below `target`; NaN if none is."""
    for seconds, value in points:
        if value <= target * (1 + 1e-9):
            return seconds
    return float("nan")


def curve_steps(iters: int, n: int) -> frozenset[int]:
    """n evenly spaced steps plus n log-spaced ones: the time to a W1 target is often reached in the first few
    percent of a run, which even spacing alone resolves only to iters / n steps."""
    even = range(max(1, iters // n), iters + 1, max(1, iters // n))
    return frozenset({*even, *np.unique(np.geomspace(1, iters, n).round().astype(int)).tolist(), iters})
