"""`flowlab cells fit|predict|evaluate`: WFR-FM (and its baselines) on an .h5ad or a `samples,x1..xd` CSV."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from flowlab.biology_dynamics.wfr_fm.names import METHODS, PLAN_SOLVERS, PRESETS
from flowlab.core.cli import (
    OVERWRITE_HELP,
    RESUME_HELP,
    SEEDS,
    claim_run_option,
    device_option,
    json_text,
    option_error,
    positive_ints_option,
)

if TYPE_CHECKING:
    import anndata as ad

app = typer.Typer(help="WFR-FM: unbalanced single-cell dynamics (velocity + growth) from time-course snapshots.")


#: a method's error field -> the parameter of the command it is about
ALIASES = {"path": "MODEL_DIR"}


def _read(ctx: typer.Context, path: Path, time_key: str, use_rep: str) -> ad.AnnData:
    """A time course from .h5ad (times in obs[time_key]) or .csv (times in the column `time_key`, `samples` for the
    default key; copied to obs[time_key]), checked: numeric finite times, a finite embedding obsm[use_rep]."""
    import anndata as ad

    from flowlab.biology_dynamics.wfr_fm.data import embedding, obs_times, read_time_series_csv

    if not path.is_file():
        raise typer.BadParameter(f"{path} not found", param_hint="DATA")
    column = "samples" if time_key == "time" else time_key
    try:
        if path.suffix == ".csv":
            adata = read_time_series_csv(path, time_col=column)
            if time_key != "time":
                adata.obs[time_key] = adata.obs["time"]
        else:
            adata = ad.read_h5ad(path)
    except (ValueError, KeyError, OSError) as err:  # empty, wrong header, text values, not an HDF5 file
        if time_key != "time" and str(err).startswith("time_col"):
            raise typer.BadParameter(f"{path.name} has no column {column!r}", param_hint="--time-key") from err
        raise typer.BadParameter(f"{path}: not a readable time course ({err})", param_hint="DATA") from err
    if adata.n_obs == 0:
        raise typer.BadParameter(f"{path}: holds no cells", param_hint="DATA")
    try:
        obs_times(adata, time_key)
        embedding(adata, use_rep)
    except ValueError as err:
        raise option_error(err, ctx=ctx, default="DATA", where=path.name) from err
    return adata


def _times(text: str | None) -> list[float] | None:
    """--times as numbers (None: the model's own times)."""
    try:
        return [float(v) for v in text.split(",")] if text else None
    except ValueError as err:
        raise typer.BadParameter(f"expected comma-separated numbers, got {text!r}", param_hint="--times") from err


@app.command("fit")
def fit_cmd(
    ctx: typer.Context,
    data: Path = typer.Argument(..., help=".h5ad (times in .obs, embedding in .obsm) or a samples,x1..xd CSV"),
    out: Path = typer.Option(Path("wfr_fm_model"), "--out", help="folder for the fitted model"),
    time_key: str = typer.Option("time", "--time-key"),
    use_rep: str = typer.Option("X_emb", "--use-rep", help="obsm key of the embedding (or X)"),
    method: str = typer.Option("wfr_fm", "--method", help=f"one of {', '.join(METHODS)}"),
    delta: str = typer.Option(
        "data",
        "--delta",
        help="WFR length scale (wfr_fm, uot_cfm): a number, `data` (from how far cells move between consecutive "
        "times) or `auto` (the best of five such candidates on held-out cells: five fits)",
    ),
    preset: str | None = typer.Option(
        None,
        "--config",
        help=f"sizes of one of {', '.join(PRESETS)} (the benchmarks' variants); the options below override it",
    ),
    iters: int | None = typer.Option(None, "--iters", help="training steps (default: the preset's, else the method's)"),
    batch: int | None = typer.Option(None, "--batch", help="pairs (or cells) per interval per step"),
    v_hidden: str | None = typer.Option(None, "--v-hidden", help="velocity MLP widths, e.g. 128,128,128"),
    g_hidden: str | None = typer.Option(None, "--g-hidden", help="growth MLP widths (wfr_fm, neural_ode)"),
    plan_iters: int | None = typer.Option(
        None, "--plan-iters", help="unbalanced plan iterations of the mm solver (wfr_fm, uot_cfm)"
    ),
    plan_solver: str | None = typer.Option(
        None,
        "--plan-solver",
        help=f"unbalanced plan solver (wfr_fm, uot_cfm), one of {', '.join(PLAN_SOLVERS)} (default mm; "
        "sinkhorn: several times faster from a few thousand cells per time, closer to the optimum)",
    ),
    hold_out: float | None = typer.Option(None, "--hold-out", help="an interior time point to leave out"),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
    annotated: Path | None = typer.Option(None, "--write-h5ad", help="write the AnnData with fields stored back"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Fit a model and save it (a FlowLab checkpoint folder). The same fit again needs --resume (it fits again to the
    same model: a fit saves only at its end) or --overwrite; a model fitted with other data or options is refused
    unless --overwrite."""
    import torch

    from flowlab.biology_dynamics.wfr_fm.data import fit_series
    from flowlab.biology_dynamics.wfr_fm.delta import parse_delta, resolve_delta
    from flowlab.biology_dynamics.wfr_fm.model import WFRConfig
    from flowlab.biology_dynamics.wfr_fm.presets import sized
    from flowlab.biology_dynamics.wfr_fm.registry import model_class
    from flowlab.biology_dynamics.wfr_fm.tl import annotate

    if method not in METHODS:
        raise typer.BadParameter(f"expected one of {METHODS}", param_hint="--method")
    device_option(device)
    if preset is not None and preset not in PRESETS:
        raise typer.BadParameter(f"expected one of {PRESETS}, got {preset!r}", param_hint="--config")
    widths = {
        name: None if text is None else positive_ints_option(text, option)
        for name, text, option in (("v_hidden", v_hidden, "--v-hidden"), ("g_hidden", g_hidden, "--g-hidden"))
    }
    adata = _read(ctx, data, time_key, use_rep)
    klass = model_class(method)
    has_delta = "delta" in {f.name for f in dataclasses.fields(klass.config_cls)}
    try:
        delta_setting = parse_delta(delta)
        config = sized(
            klass.config_cls(),
            preset,
            iters=iters,
            batch=batch,
            plan_iters=plan_iters,
            plan_solver=plan_solver,
            **widths,
        )
        fit_series(adata, time_key=time_key, use_rep=use_rep, hold_out=hold_out)
    except ValueError as err:
        raise option_error(err, ctx=ctx, default="DATA") from err
    digest = hashlib.sha256(data.read_bytes()).hexdigest()
    settings = {k: v for k, v in config.to_dict().items() if k != "delta"}
    spec = {"command": "cells fit", "method": method, "config": settings,
            "delta": delta_setting if has_delta else None, "time_key": time_key, "use_rep": use_rep,
            "hold_out": hold_out, "seed": seed, "data_sha256": digest}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    try:
        if has_delta:
            shared = set(WFRConfig.__dataclass_fields__) & set(type(config).__dataclass_fields__)
            wfr = dataclasses.replace(WFRConfig(), **{k: getattr(config, k) for k in shared})
            value, chosen = resolve_delta(delta_setting, adata, wfr, time_key=time_key, use_rep=use_rep,
                                          hold_out=hold_out, seed=seed, device=device)  # fmt: skip
            config = dataclasses.replace(config, delta=value)
            if chosen is not None:
                tried = ", ".join(f"{d:.3g}: {w:.4g}" for d, w in chosen.scores.items())
                typer.echo(f"delta auto: held-out mean W1 by delta {{{tried}}}")
            typer.echo(f"delta = {value:.4g}" + (f" ({delta_setting})" if isinstance(delta_setting, str) else ""))
        model = klass(config).fit(
            adata,
            time_key=time_key,
            use_rep=use_rep,
            hold_out=hold_out,
            device=device,
            generator=torch.Generator(device).manual_seed(seed),
            progress=True,
        )
    except ValueError as err:
        raise option_error(err, ctx=ctx, default="DATA") from err
    folder = model.save(out)
    typer.echo(f"saved {method} to {folder} (trained in {model.state.train_seconds:.1f} s)")
    if annotated is not None:
        annotate(model, adata, time_key=time_key, use_rep=use_rep, key_added=method)
        adata.write_h5ad(annotated)
        typer.echo(f"wrote {annotated}")


@app.command("predict")
def predict_cmd(
    ctx: typer.Context,
    model_dir: Path = typer.Argument(..., help="a folder written by `flowlab cells fit`"),
    data: Path = typer.Argument(..., help="cells to push forward (.h5ad or CSV)"),
    out: Path = typer.Option(Path("predicted.h5ad"), "--out"),
    time_key: str = typer.Option("time", "--time-key"),
    use_rep: str = typer.Option("X_emb", "--use-rep"),
    t_from: float | None = typer.Option(None, "--from", help="start time (default: the first fitted time)"),
    times: str | None = typer.Option(None, "--times", help="comma-separated output times"),
) -> None:
    """Simulate weighted particles from the cells at --from to the requested times; writes an .h5ad."""
    from flowlab.biology_dynamics.wfr_fm.registry import load_model

    ts = _times(times)
    try:
        model = load_model(model_dir)
        adata = _read(ctx, data, time_key, use_rep)
        sim = model.simulate(adata, t_from=t_from, times=ts, time_key=time_key, use_rep=use_rep)
    except (ValueError, FileNotFoundError) as err:
        raise option_error(err, ctx=ctx, default="DATA", options=ALIASES) from err
    sim.write_h5ad(out)
    typer.echo(f"wrote {sim.n_obs} particles at times {sorted(set(sim.obs['time']))} to {out}")


@app.command("evaluate")
def evaluate_cmd(
    ctx: typer.Context,
    model_dir: Path = typer.Argument(..., help="a folder written by `flowlab cells fit`"),
    data: Path = typer.Argument(..., help="the observed time course (.h5ad or CSV)"),
    time_key: str = typer.Option("time", "--time-key"),
    use_rep: str = typer.Option("X_emb", "--use-rep"),
    plot: Path | None = typer.Option(None, "--plot", help="PNG of trajectories and learned growth"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """W1 and relative total-mass error per observed time (particles from the first time point)."""
    from flowlab.biology_dynamics.wfr_fm.evaluate import evaluate_time_points
    from flowlab.biology_dynamics.wfr_fm.plot import plot_fit
    from flowlab.biology_dynamics.wfr_fm.registry import load_model

    try:
        model = load_model(model_dir)
        adata = _read(ctx, data, time_key, use_rep)
        rows = evaluate_time_points(model, adata, time_key=time_key, use_rep=use_rep)
    except (ValueError, FileNotFoundError) as err:
        raise option_error(err, ctx=ctx, default="DATA", options=ALIASES) from err
    if as_json:
        typer.echo(json_text([r.__dict__ for r in rows], indent=2))
    else:
        typer.echo(f"{'time':>6} {'W1':>8} {'TMV':>8} {'mass':>8} {'true':>8}  held-out")
        for r in rows:
            typer.echo(f"{r.time:6g} {r.w1:8.4f} {r.tmv:8.4f} {r.mass_pred:8.3f} {r.mass_true:8.3f}  {r.held_out}")
    if plot is not None:
        plot_fit(model, adata, plot, time_key=time_key, use_rep=use_rep)
        typer.echo(f"wrote {plot}")
