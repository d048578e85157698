"""One data set, every method: WFR-FM, OT-CFM, UOT-CFM and the two neural ODEs trained in the same process on the
same data, scored per time point, with W1-vs-time curves and the speed-ups read off them."""

from __future__ import annotations

import time
from dataclasses import dataclass

import anndata as ad
import numpy as np
import torch

from flowlab.biology_dynamics.wfr_fm.benchmarks.curves import W1Tracker, curve_steps, time_to
from flowlab.biology_dynamics.wfr_fm.benchmarks.settings import WFRBench
from flowlab.biology_dynamics.wfr_fm.data import time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.evaluate import (
    evaluate_time_points,
    growth_correlation,
    path_action,
    static_action,
    w1_split_floor,
)
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import GrowthNeuralODE
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFM
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFM
from flowlab.core.bench import BenchContext, Curve, warm_up_torch

__all__ = ["Comparison", "compare", "models", "per_time"]

#: the neural ODEs and the suffix of the speed-ups measured against each
_ODES = {"NeuralODE-growth": "", "NeuralODE-growth-rk4": "_rk4"}


def models(cfg: WFRBench) -> dict[str, TimeCourseModel]:
    """Every method, untrained, in the order that sets their seeds."""
    return {
        "WFR-FM": WFRFlowMatching(cfg.wfr),
        "OT-CFM": OTCFM(cfg.ot_cfm),
        "UOT-CFM": UOTCFM(cfg.uot_cfm),
        "NeuralODE-growth": GrowthNeuralODE(cfg.neural_ode),
        "NeuralODE-growth-rk4": GrowthNeuralODE(cfg.neural_ode_rk4),
    }


def per_time(model: TimeCourseModel, adata: ad.AnnData, prefix: str = "") -> dict[str, float]:
    """W1 and TMV of the fitted `model` at every later observed time of `adata` ('<prefix>w1_t<time>',
    '<prefix>tmv_t<time>') and their means over the times not held out ('<prefix>w1_mean', '<prefix>tmv_mean')."""
    rows = evaluate_time_points(model, adata)
    out: dict[str, float] = {}
    for r in rows:
        out[f"{prefix}w1_t{r.time:g}"] = r.w1
        out[f"{prefix}tmv_t{r.time:g}"] = r.tmv
    out[f"{prefix}w1_mean"] = float(np.mean([r.w1 for r in rows if not r.held_out]))
    out[f"{prefix}tmv_mean"] = float(np.mean([r.tmv for r in rows if not r.held_out]))
    return out


def _fit(model: TimeCourseModel, adata: ad.AnnData, ctx: BenchContext, offset: int, cfg: WFRBench, track: bool):
    """Train `model` from the seed ctx.seed * 1000 + offset; returns (model, training seconds, tracker or None)."""
    series = time_series_from_adata(adata)
    gen = torch.Generator(ctx.device).manual_seed(ctx.seed * 1000 + offset)
    tracker = W1Tracker(series, curve_steps(model.config.iters, cfg.curve_points)) if track else None
    start = time.perf_counter()
    model.fit(adata, device=ctx.device, generator=gen, callbacks=(tracker,) if tracker else ())
    seconds = time.perf_counter() - start - (tracker.eval_seconds if tracker else 0.0)
    return model, seconds, tracker


@dataclass(frozen=True)
class Comparison:
    """Our metrics (WFR-FM's, with the speed-ups), the baselines' by label, the W1 curves and the fitted WFR-FM."""

    ours: dict[str, float]
    baselines: dict[str, dict[str, float]]
    curves: list[Curve]
    wfr: WFRFlowMatching


def compare(
    ctx: BenchContext,
    adata: ad.AnnData,
    cfg: WFRBench,
    *,
    true_growth: np.ndarray | None = None,
    prefix: str = "",
    neural_odes: bool = True,
    scored: ad.AnnData | None = None,
) -> Comparison:
    """Fit every method on `adata` (the neural ODEs only with `neural_odes`: without them there is no speed-up, so
    no W1 curve either) and score them on `scored` (default: `adata`; fresh cells of the same law keep a method
    that fits noise from looking good); metric names carry `prefix`."""
    scored = adata if scored is None else scored
    warm_up_torch()  # else the first model trained (WFR-FM) pays torch's one-time import in its training time
    ours: dict[str, float] = {}
    baselines: dict[str, dict[str, float]] = {}
    trackers = {}
    wfr = None
    for k, (label, model) in enumerate(models(cfg).items()):
        if label in _ODES and not neural_odes:
            continue
        if label == "UOT-CFM":
            model.reuse_plans = wfr.plans  # the same plan as WFR-FM: only the path and the growth field differ
        tracked = (label == "WFR-FM" or label in _ODES) and neural_odes
        model, seconds, tracker = _fit(model, adata, ctx, k, cfg, track=tracked)
        trackers[label] = tracker
        metrics = per_time(model, scored, prefix)
        metrics[f"{prefix}train_seconds"] = seconds
        if true_growth is not None and (label == "WFR-FM" or label in _ODES):
            metrics[f"{prefix}growth_corr"] = growth_correlation(model, adata, true_growth)
            metrics[f"{prefix}growth_corr_within_time"] = growth_correlation(
                model, adata, true_growth, within_time=True
            )
        if label == "WFR-FM":
            wfr = model
            x0 = time_series_from_adata(adata).X[0].numpy()
            metrics[f"{prefix}action"] = path_action(model, x0, delta=cfg.wfr.delta)
            metrics[f"{prefix}static_wfr_action"] = static_action(model.plans, model.state.times, x0.shape[0])
            metrics[f"{prefix}plan_seconds"] = model.plans.seconds
            ours.update(metrics)
        else:
            baselines[label] = metrics
    later = time_series_from_adata(scored).X[1:]
    ours[f"{prefix}w1_floor_mean"] = float(np.mean([w1_split_floor(x, seed=ctx.seed) for x in later]))
    curves = []
    for label, sfx in _ODES.items():
        if label not in trackers:
            continue
        a, b = trackers["WFR-FM"].points, trackers[label].points
        target = max(a[-1][1], b[-1][1])
        t_wfr, t_ode = time_to(a, target), time_to(b, target)
        ours[f"{prefix}w1_target{sfx}"] = target
        ours[f"{prefix}time_to_w1_target{sfx}"] = t_wfr
        baselines[label][f"{prefix}time_to_w1_target"] = t_ode
        ours[f"{prefix}speedup_to_w1{sfx}"] = t_ode / t_wfr
        # against WFR-FM's own final W1: if the neural ODE never gets there, its whole training time gives a
        # lower bound on the speed-up (flagged by neural_ode_reached_wfr_w1 = 0)
        t_wfr_own = time_to(a, a[-1][1])
        t_ode_own = time_to(b, a[-1][1])
        reached = not np.isnan(t_ode_own)
        ours[f"{prefix}neural_ode_reached_wfr_w1{sfx}"] = float(reached)
        ours[f"{prefix}speedup_to_wfr_w1{sfx}"] = (t_ode_own if reached else b[-1][0]) / t_wfr_own
    if any(label in trackers for label in _ODES):
        curves.append(
            Curve(
                title=f"{prefix or ''}mean W1 vs training time",
                xlabel="training seconds (evaluation excluded)",
                ylabel="mean W1 over time points",
                lines={k: ([p[0] for p in v.points], [p[1] for p in v.points]) for k, v in trackers.items() if v},
                logy=True,
            )
        )
    return Comparison(ours=ours, baselines=baselines, curves=curves, wfr=wfr)
