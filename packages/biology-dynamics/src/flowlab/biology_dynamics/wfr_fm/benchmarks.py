"""Benchmark scenarios bio.wfr_fm.{gene,emt,dygen}: WFR-FM against OT-CFM, UOT-CFM and a simulation-trained
growth neural ODE (twice: through the adjoint of adaptive dopri5 as the spec and TIGON train it, and our faster
backpropagation through fixed-step rk4), all trained in the same process on the same data.

Reported per method: W1 (`ot.emd2`) and TMV per observed time (`w1_t<k>`, `tmv_t<k>`) and their means, training
wall time, and for WFR-FM the path action against the static WFR optimum; with known growth the Pearson correlation
of learned and true growth. `speedup_to_w1`: training time of the neural ODE over WFR-FM's to reach the same mean W1
(the worse of the two final values), from W1-vs-time curves sampled during training (evaluation time excluded);
`speedup_to_w1_rk4` the same against the rk4 variant. `w1_floor_mean`: the mean over the scored times of the W1
between two random halves of the cells (`w1_split_floor`), the metric's sampling-noise level: W1 values near it do
not rank methods, and a W1 target near it times each method's approach to the noise.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anndata as ad
import numpy as np
import torch

from flowlab.biology_dynamics.wfr_fm.data import read_time_series_csv, time_series_from_adata
from flowlab.biology_dynamics.wfr_fm.evaluate import (
    evaluate_time_points,
    gene_growth_profile,
    growth_correlation,
    path_action,
    static_action,
    w1,
    w1_split_floor,
)
from flowlab.biology_dynamics.wfr_fm.generators import branching_toggle_switch
from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel, WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import GrowthNeuralODE, NeuralODEConfig
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFM, OTCFMConfig
from flowlab.biology_dynamics.wfr_fm.sample import simulate_particles
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFM, UOTCFMConfig
from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario, require_file, torch_threads, warm_up_torch

__all__ = ["SCENARIOS"]

PAPER = "WFR-FM [paper, unverified]"


class _W1Tracker:
    """Callback: at the given steps, mean W1 over the training times of the (EMA) fields, against training wall
    time with the evaluation's own time excluded. It scores what the final evaluation scores (particles from every
    cell of the first time, the same adaptive solver): a subsample's finite-sample W1 floor would hide the fields'
    progress (200 of gene's 400 cells gave 0.108 for fields the full evaluation puts at 0.054)."""

    def __init__(self, series, steps: frozenset[int]) -> None:
        self.series, self.steps = series, steps
        self.x0 = series.X[0]
        t = np.asarray(series.times)
        self.tau = torch.tensor((t - t[0]) / (t[-1] - t[0]), dtype=torch.float32)
        self.start = time.perf_counter()
        self.eval_seconds = 0.0
        self.points: list[tuple[float, float]] = []

    def __call__(self, info: Any) -> None:
        if info.step not in self.steps:
            return
        begin = time.perf_counter()
        fields = info.model
        with torch.no_grad(), info.ema.swap() if info.ema is not None else _null():
            dev = next(fields.parameters()).device
            traj = simulate_particles(fields, self.x0.to(dev), self.tau.to(dev))
            ws = traj.weights.cpu().numpy()
            value = float(np.mean([w1(traj.x[k], self.series.X[k], ws[k]) for k in range(1, len(self.tau))]))
        self.eval_seconds += time.perf_counter() - begin
        self.points.append((time.perf_counter() - self.start - self.eval_seconds, value))


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _time_to(points: list[tuple[float, float]], target: float) -> float:
    for seconds, value in points:
        if value <= target * (1 + 1e-9):
            return seconds
    return float("nan")


def _per_time(model: TimeCourseModel, adata: ad.AnnData, prefix: str = "") -> dict[str, float]:
    rows = evaluate_time_points(model, adata)
    out: dict[str, float] = {}
    for r in rows:
        out[f"{prefix}w1_t{r.time:g}"] = r.w1
        out[f"{prefix}tmv_t{r.time:g}"] = r.tmv
    out[f"{prefix}w1_mean"] = float(np.mean([r.w1 for r in rows if not r.held_out]))
    out[f"{prefix}tmv_mean"] = float(np.mean([r.tmv for r in rows if not r.held_out]))
    return out


def _curve_steps(iters: int, n: int) -> frozenset[int]:
    """n evenly spaced steps plus n log-spaced ones: the time to a W1 target is often reached in the first few
    percent of a run, which even spacing alone resolves only to iters / n steps."""
    even = range(max(1, iters // n), iters + 1, max(1, iters // n))
    return frozenset({*even, *np.unique(np.geomspace(1, iters, n).round().astype(int)).tolist(), iters})


def _fit(model: TimeCourseModel, adata, ctx: BenchContext, offset: int, cfg: Mapping[str, Any], track: bool):
    series = time_series_from_adata(adata)
    gen = torch.Generator(ctx.device).manual_seed(ctx.seed * 1000 + offset)
    tracker = None
    callbacks = ()
    if track:
        tracker = _W1Tracker(series, _curve_steps(model.config.iters, cfg["curve_points"]))
        callbacks = (tracker,)
    start = time.perf_counter()
    model.fit(adata, device=ctx.device, generator=gen, callbacks=callbacks)
    seconds = time.perf_counter() - start - (tracker.eval_seconds if tracker else 0.0)
    return model, seconds, tracker


# the simulation-trained baseline as the spec and TIGON have it (adjoint through adaptive dopri5), and a faster
# variant of ours (backpropagation through fixed-step rk4: about 4x less time per step at a similar W1 on gene and
# EMT); the speed-up is reported against both, the rk4 one under the suffix "_rk4"
_ADJOINT = {"solver": "dopri5", "adjoint": True}
_BACKPROP = {"solver": "rk4", "step_size": 0.05, "adjoint": False}
_ODES = {"NeuralODE-growth": "", "NeuralODE-growth-rk4": "_rk4"}


def _models(cfg: Mapping[str, Any], delta: float) -> dict[str, TimeCourseModel]:
    m = dict(cfg["matching"])
    return {
        "WFR-FM": WFRFlowMatching(WFRConfig(delta=delta, **m, **cfg["wfr"])),
        "OT-CFM": OTCFM(OTCFMConfig(**{k: v for k, v in m.items() if k not in ("plan_iters",)}, **cfg["ot_cfm"])),
        "UOT-CFM": UOTCFM(UOTCFMConfig(delta=delta, **m)),
        "NeuralODE-growth": GrowthNeuralODE(NeuralODEConfig(**cfg["neural_ode"], **_ADJOINT)),
        "NeuralODE-growth-rk4": GrowthNeuralODE(NeuralODEConfig(**cfg["neural_ode"], **_BACKPROP)),
    }


def _plots(ctx: BenchContext, name: str, adata: ad.AnnData, model: WFRFlowMatching, true_g=None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, t = adata.obsm["X_emb"], adata.obs["time"].to_numpy()
    series = time_series_from_adata(adata)
    x0 = series.X[0][:: max(1, series.X[0].shape[0] // 60)].numpy()
    traj = model.simulate_points(x0, times=np.linspace(series.times[0], series.times[-1], 41).tolist())
    paths = traj.x.cpu().numpy()
    fig, axes = plt.subplots(1, 2 if true_g is None else 3, figsize=(13 if true_g is None else 18, 5))
    axes[0].scatter(X[:, 0], X[:, 1], c=t, s=4, alpha=0.3, cmap="viridis")
    for i in range(paths.shape[1]):
        axes[0].plot(paths[:, i, 0], paths[:, i, 1], color="black", lw=0.5, alpha=0.5)
    axes[0].set_title(f"{name}: data by time, WFR-FM trajectories")
    g = np.concatenate([model.growth(x.numpy(), tt) for tt, x in zip(series.times, series.X)])
    pos = np.concatenate([x.numpy() for x in series.X])
    sc = axes[1].scatter(pos[:, 0], pos[:, 1], c=g, s=4, cmap="plasma")
    fig.colorbar(sc, ax=axes[1])
    axes[1].set_title("learned growth g(t, x)")
    if true_g is not None:
        sc = axes[2].scatter(X[:, 0], X[:, 1], c=true_g, s=4, cmap="plasma")
        fig.colorbar(sc, ax=axes[2])
        axes[2].set_title("true growth")
    for ax in axes:
        ax.set_xlabel("dim 1")
        ax.set_ylabel("dim 2")
    path = ctx.out_dir / f"wfr_fm_{name}_trajectories_growth.png"
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return [path]


def _compare(ctx: BenchContext, adata: ad.AnnData, delta: float, cfg: Mapping[str, Any], *, true_g=None, prefix=""):
    """Fit every method on one data set (the neural ODEs only if cfg["neural_ode_on"], default on); returns (ours,
    baselines, curves, wfr model)."""
    warm_up_torch()  # else the first model trained (WFR-FM) pays torch's one-time import in its training time
    models = _models(cfg, delta)
    ours: dict[str, float] = {}
    baselines: dict[str, dict[str, float]] = {}
    trackers = {}
    wfr = None
    ode_on = cfg.get("neural_ode_on", True)  # without a neural ODE there is no speed-up, so no W1 curve either
    for k, (label, model) in enumerate(models.items()):
        if label in _ODES and not ode_on:
            continue
        if label == "UOT-CFM":
            model.reuse_plans = wfr.plans  # the same plan as WFR-FM: only the path and the growth field differ
        tracked = (label == "WFR-FM" or label in _ODES) and ode_on
        model, seconds, tracker = _fit(model, adata, ctx, k, cfg, track=tracked)
        trackers[label] = tracker
        metrics = _per_time(model, adata, prefix)
        metrics[f"{prefix}train_seconds"] = seconds
        if true_g is not None and (label == "WFR-FM" or label in _ODES):
            metrics[f"{prefix}growth_corr"] = growth_correlation(model, adata, true_g)
            metrics[f"{prefix}growth_corr_within_time"] = growth_correlation(model, adata, true_g, within_time=True)
        if label == "WFR-FM":
            wfr = model
            x0 = time_series_from_adata(adata).X[0].numpy()
            metrics[f"{prefix}action"] = path_action(model, x0, delta=delta)
            metrics[f"{prefix}static_wfr_action"] = static_action(model.plans, model.state.times, x0.shape[0])
            metrics[f"{prefix}plan_seconds"] = model.plans.seconds
            ours.update(metrics)
        else:
            baselines[label] = metrics
    scored = time_series_from_adata(adata).X[1:]
    ours[f"{prefix}w1_floor_mean"] = float(np.mean([w1_split_floor(x, seed=ctx.seed) for x in scored]))
    curves = []
    for label, sfx in _ODES.items():
        if label not in trackers:
            continue
        a, b = trackers["WFR-FM"].points, trackers[label].points
        target = max(a[-1][1], b[-1][1])
        t_wfr, t_ode = _time_to(a, target), _time_to(b, target)
        ours[f"{prefix}w1_target{sfx}"] = target
        ours[f"{prefix}time_to_w1_target{sfx}"] = t_wfr
        baselines[label][f"{prefix}time_to_w1_target"] = t_ode
        ours[f"{prefix}speedup_to_w1{sfx}"] = t_ode / t_wfr
        # against WFR-FM's own final W1: if the neural ODE never gets there, its whole training time gives a
        # lower bound on the speed-up (flagged by neural_ode_reached_wfr_w1 = 0)
        t_wfr_own = _time_to(a, a[-1][1])
        t_ode_own = _time_to(b, a[-1][1])
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
    return ours, baselines, curves, wfr


def _run_gene(ctx: BenchContext) -> BenchResult:
    cfg = ctx.config
    adata = read_time_series_csv(require_file(ctx.data_root, "single_cell", "simulation_gene_data.csv"))
    with torch_threads(cfg.get("threads")):
        true_g = gene_growth_profile(adata.obsm["X_emb"])
        ours, baselines, curves, wfr = _compare(ctx, adata, 1.5, cfg, true_g=true_g)
        plots = _plots(ctx, "gene", adata, wfr, true_g)
        # the toggle-switch generator: growth known exactly (λ − μ); coupling-based methods only
        toggle = branching_toggle_switch(
            cfg["toggle_n0"], generator=torch.Generator().manual_seed(ctx.seed), times=(0.0, 1.0, 2.0, 3.0, 4.0)
        )
        tcfg = {**cfg, "neural_ode_on": False}
        t_ours, t_base, _, t_wfr = _compare(
            ctx, toggle, cfg["toggle_delta"], tcfg, true_g=toggle.obs["true_growth"].to_numpy(), prefix="toggle_"
        )
        ours.update(t_ours)
        for k, v in t_base.items():
            baselines.setdefault(k, {}).update(v)
        plots += _plots(ctx, "toggle", toggle, t_wfr, toggle.obs["true_growth"].to_numpy())
    refs = {
        PAPER: {
            "w1_mean": 0.019,
            "tmv_mean": 0.001,
            "growth_corr": 0.9913,
            "action": 1.305,
            "static_wfr_action": 1.333,
        },
        "TIGON [paper, unverified]": {"w1_mean": 0.045, "tmv_mean": 0.014, "growth_corr": 0.9705},
        "DeepRUOT [paper, unverified]": {"w1_mean": 0.043, "tmv_mean": 0.017},
        "UOT-FM [paper, unverified]": {"w1_mean": 0.093, "tmv_mean": 0.010},
    }
    return BenchResult(metrics=ours, baselines=baselines, references=refs, curves=curves, plots=plots)


def _run_emt(ctx: BenchContext) -> BenchResult:
    cfg = ctx.config
    adata = read_time_series_csv(require_file(ctx.data_root, "single_cell", "emt.csv"))
    with torch_threads(cfg.get("threads")):
        ours, baselines, curves, wfr = _compare(ctx, adata, 2.0, cfg)
        plots = _plots(ctx, "emt", adata, wfr)
        for k, held in enumerate(cfg["hold_out"]):
            models = _models(cfg, 2.0)
            for label in cfg["hold_out_methods"]:
                model = models[label]
                gen = torch.Generator(ctx.device).manual_seed(ctx.seed * 1000 + 100 + k)
                model.fit(adata, hold_out=float(held), device=ctx.device, generator=gen)
                rows = [r for r in evaluate_time_points(model, adata) if r.held_out]
                target = ours if label == "WFR-FM" else baselines.setdefault(label, {})
                target[f"holdout_w1_t{held:g}"] = rows[0].w1
    refs = {
        PAPER: {"holdout_w1_t1": 0.298, "holdout_w1_t2": 0.298},
        "TIGON [paper, unverified]": {"holdout_w1_t1": 0.360, "holdout_w1_t2": 0.360},
        "DeepRUOT [paper, unverified]": {"holdout_w1_t1": 0.323, "holdout_w1_t2": 0.323},
        "VGFM [paper, unverified]": {"holdout_w1_t1": 0.301, "holdout_w1_t2": 0.301},
    }
    return BenchResult(metrics=ours, baselines=baselines, references=refs, curves=curves, plots=plots)


def _run_dygen(ctx: BenchContext) -> BenchResult:
    cfg = ctx.config
    adata = read_time_series_csv(require_file(ctx.data_root, "single_cell", "dygen.csv"))
    with torch_threads(cfg.get("threads")):
        ours, baselines, curves, wfr = _compare(ctx, adata, 2.0, cfg)
        plots = _plots(ctx, "dygen", adata, wfr)
    refs = {
        PAPER: {"w1_mean": 0.135},
        "TIGON [paper, unverified]": {"w1_mean": 0.512},
        "DeepRUOT [paper, unverified]": {"w1_mean": 0.623},
        "UOT-FM [paper, unverified]": {"w1_mean": 1.204},
    }
    return BenchResult(metrics=ours, baselines=baselines, references=refs, curves=curves, plots=plots)


_QUICK_MATCHING = {"v_hidden": (128,) * 3, "iters": 500, "batch": 128, "plan_iters": 300}
_FULL_MATCHING = {"v_hidden": (256,) * 5, "iters": 3000, "batch": 256, "plan_iters": 1000}
_BASE = {"threads": 1, "curve_points": 20}
QUICK = {
    **_BASE,
    "matching": _QUICK_MATCHING,
    "wfr": {"g_hidden": (128,) * 2},
    "ot_cfm": {},
    "neural_ode": {"v_hidden": (64,) * 3, "g_hidden": (64,) * 2, "iters": 80, "batch": 128},
}
FULL = {
    **_BASE,
    "curve_points": 30,
    "matching": _FULL_MATCHING,
    "wfr": {"g_hidden": (256,) * 3},
    "ot_cfm": {},
    "neural_ode": {"v_hidden": (128,) * 3, "g_hidden": (128,) * 2, "iters": 1500, "batch": 256},
}

_DIRECTIONS = {
    "w1_mean": "min",
    "tmv_mean": "min",
    "growth_corr": "max",
    "holdout_w1_t1": "min",
    "holdout_w1_t2": "min",
    "train_seconds": "min",
    "speedup_to_w1": "max",
    "speedup_to_wfr_w1": "max",
    "speedup_to_w1_rk4": "max",
    "speedup_to_wfr_w1_rk4": "max",
}

SCENARIOS = (
    Scenario(
        name="bio.wfr_fm.gene",
        package="biology-dynamics",
        method="wfr_fm",
        run=_run_gene,
        variants={
            "quick": {**QUICK, "toggle_n0": 150, "toggle_delta": 1.5},
            "full": {**FULL, "matching": {**_FULL_MATCHING, "batch": 400}, "toggle_n0": 400, "toggle_delta": 1.5},
        },
        directions={**_DIRECTIONS, "toggle_growth_corr": "max", "toggle_w1_mean": "min"},
        tags=frozenset({"single_cell", "unbalanced_ot", "ground_truth_growth"}),
        description="Gene-regulatory simulation (DeepRUOT data, δ=1.5) and the toggle-switch generator: W1/TMV per "
        "time, growth correlation, path action vs static WFR, speed-up over a simulation-trained neural ODE.",
    ),
    Scenario(
        name="bio.wfr_fm.emt",
        package="biology-dynamics",
        method="wfr_fm",
        run=_run_emt,
        variants={
            "quick": {**QUICK, "hold_out": (1.0, 2.0), "hold_out_methods": ("WFR-FM",)},
            "full": {**FULL, "hold_out": (1.0, 2.0), "hold_out_methods": ("WFR-FM", "OT-CFM", "UOT-CFM")},
        },
        directions=_DIRECTIONS,
        tags=frozenset({"single_cell", "unbalanced_ot"}),
        description="EMT (10-D, 4 times, δ=2): all-time-points fit and hold-one-out t=1, t=2 (quick: WFR-FM only).",
    ),
    Scenario(
        name="bio.wfr_fm.dygen",
        package="biology-dynamics",
        method="wfr_fm",
        run=_run_dygen,
        variants={"quick": QUICK, "full": FULL},
        directions=_DIRECTIONS,
        tags=frozenset({"single_cell", "unbalanced_ot"}),
        description="Dyngen bifurcation (5-D, 5 times with shrinking and growing counts, δ=2).",
    ),
)
