"""`flowlab trust train|certify|evaluate`: train the study's models, certify samples, print the metric tables."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
import typer

from flowlab.trust_ood.certificate.evaluate import (
    METHODS,
    REGRESSORS,
    StudyConfig,
    evaluate_study,
    load_study,
    measure_latency,
    save_study,
    to_tensors,
    train_study,
)
from flowlab.trust_ood.certificate.pde1d import FAMILIES, PDES, generate
from flowlab.trust_ood.certificate.score import VARIANTS, DensityModels, calibrate_threshold, certificate

app = typer.Typer(help="Joint-likelihood certificates of trust for PDE regression (JLBC).", no_args_is_help=True)


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@app.command()
def train(
    pde: str = typer.Option("heat", help=f"one of {PDES}"),
    out: Path = typer.Option(..., help="folder for the trained models"),
    n: int = typer.Option(32, help="grid size"),
    pairs: int = typer.Option(2000, min=1, help="training pairs"),
    regressor_steps: int = typer.Option(600),
    score_steps: int = typer.Option(1200),
    regressor: str = typer.Option("fno", help=f"Psi's backbone, one of {REGRESSORS}"),
    ode_steps: int = typer.Option(12, help="rk4 steps of the likelihood ODE (log-sigma grid) when certifying"),
    seed: int = typer.Option(0),
    device: str = typer.Option("cpu"),
) -> None:
    """Train the regressor Psi (FNO or CNN) with its ensemble, and the joint and input-only score models."""
    if pde not in PDES:
        _fail(f"--pde: expected one of {PDES}, got {pde!r}")
    try:
        cfg = StudyConfig(pde=pde, n=n, train_pairs=pairs, regressor_steps=regressor_steps, score_steps=score_steps,
                          regressor=regressor, ode_steps=ode_steps, seed=seed, sigma=25.0)  # fmt: skip
        cfg.pde_config()
    except ValueError as err:
        _fail(str(err))
    models = train_study(cfg, device=device, generator=torch.Generator().manual_seed(seed), progress=True)
    save_study(models, out)
    typer.echo(f"saved to {out} ({', '.join(f'{k}={v:.1f}' for k, v in models.timings.items())})")


@app.command()
def certify(
    run: Path = typer.Option(..., help="folder written by `flowlab trust train`"),
    family: str = typer.Option("param_shift", help=f"one of {FAMILIES}"),
    count: int = typer.Option(8, min=1, help="samples to certify"),
    variant: str = typer.Option("x&y", help=f"one of {VARIANTS[:2] + VARIANTS[3:4]}"),
    seed: int = typer.Option(1),
    device: str = typer.Option("cpu"),
) -> None:
    """Certify `count` fresh samples of a family: score (bits/dim), threshold from 32 ID samples, OOD flag."""
    if family not in FAMILIES:
        _fail(f"--family: expected one of {FAMILIES}, got {family!r}")
    if variant not in ("x&y", "x", "y|x"):
        _fail(f"--variant: expected one of x&y, x, y|x (the trained models), got {variant!r}")
    try:
        models = load_study(run, device=device)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    cfg = models.config
    dens = DensityModels(joint=models.joint, input=models.input)
    opts = dict(cfg.ode_options(), variant=variant)
    g = torch.Generator().manual_seed(seed)
    xc, pc, _ = to_tensors(generate(cfg.pde_config(), "id", cfg.calib, seed=seed + 1000), models.param_scale, device)
    threshold = calibrate_threshold(certificate(dens, models.regressor, xc, pc, generator=g, **opts).score)
    x, p, _ = to_tensors(generate(cfg.pde_config(), family, count, seed=seed), models.param_scale, device)
    res = certificate(dens, models.regressor, x, p, generator=g, **opts)
    typer.echo(f"threshold (median - 1.5 std of {cfg.calib} ID samples): {threshold:.4f} bits/dim")
    for i, s in enumerate(res.score.tolist()):
        typer.echo(f"{family}[{i}]  certificate {s:.4f}  {'OOD' if s < threshold else 'ok'}")


@app.command()
def evaluate(
    run: Path = typer.Option(..., help="folder written by `flowlab trust train`"),
    out: Path | None = typer.Option(None, help="write the tables as JSON here"),
    per_family: int | None = typer.Option(None, help="test samples per family (default: the study's)"),
    latency_batch: int = typer.Option(256, help="batch size of the latency measurement"),
    seed: int = typer.Option(1),
    device: str = typer.Option("cpu"),
) -> None:
    """Score every OOD family with the certificate and the baselines; print AUROC/ACC/FPR/Spearman tables."""
    try:
        models = load_study(run, device=device)
    except (FileNotFoundError, ValueError) as err:
        _fail(str(err))
    if per_family is not None:
        if per_family < 2:
            _fail(f"--per-family: expected at least 2 samples, got {per_family}")
        models.config = replace(models.config, test_per_family=per_family)
    g = torch.Generator().manual_seed(seed)
    result = evaluate_study(models, device=device, generator=g)
    latency = measure_latency(models, batch=latency_batch, device=device, generator=g)
    for fam, table in result.tables.items():
        typer.echo(f"\n{fam}")
        typer.echo(f"  {'method':12s} auroc   acc     fpr     spearman")
        for m in METHODS:
            r = table[m]
            typer.echo(f"  {m:12s} {r['auroc']:.3f}   {r['acc']:.3f}   {r['fpr']:.3f}   {r['spearman']:.3f}")
    typer.echo(f"\nID relative L1 error of Psi: {result.id_error:.4f}")
    typer.echo(", ".join(f"{k}={v:.3f}" for k, v in latency.items()))
    if out is not None:
        out.write_text(json.dumps({"tables": result.tables, "latency": latency, "id_error": result.id_error}, indent=2))
