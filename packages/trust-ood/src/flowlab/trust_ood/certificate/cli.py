"""`flowlab trust train|certify|evaluate`: train the study's models, certify samples, print the metric tables."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, claim_run_option, device_option, json_text
from flowlab.trust_ood.certificate.names import FAMILIES, METHODS, PDES, REGRESSORS, VARIANTS

app = typer.Typer(help="Joint-likelihood certificates of trust for PDE regression (JLBC).", no_args_is_help=True)


#: the variants `certify` scores with the trained models (the joint and the input-only one)
CERTIFIED = (*VARIANTS[:2], VARIANTS[3])


def _choice(value: str, choices: tuple[str, ...], option: str) -> None:
    if value not in choices:
        raise typer.BadParameter(f"expected one of {', '.join(choices)}, got {value!r}", param_hint=option)


def _load(run: Path, device):
    """The study trained into `run`, every problem a typer error against --run."""
    from flowlab.trust_ood.certificate.evaluate import load_study

    try:
        return load_study(run, device=device)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err).removeprefix("run: "), param_hint="--run") from None


@app.command()
def train(
    pde: str = typer.Option("heat", help=f"one of {PDES}"),
    out: Path = typer.Option(..., help="folder for the trained models"),
    n: int = typer.Option(32, help="grid size (even, at least 32)"),
    pairs: int = typer.Option(2000, min=1, help="training pairs"),
    regressor_steps: int = typer.Option(600, min=1),
    score_steps: int = typer.Option(1200, min=1),
    regressor: str = typer.Option("fno", help=f"Psi's backbone, one of {REGRESSORS}"),
    ode_steps: int = typer.Option(12, min=1, help="rk4 steps of the likelihood ODE (log-sigma grid) when certifying"),
    seed: int = typer.Option(0, min=0),
    device: str = typer.Option("cpu"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Train the regressor Psi (FNO or CNN) with its ensemble, and the joint and input-only score models. The same study
    again needs --resume (it trains again to the same models: a study saves only at its end) or --overwrite; a
    different study in --out is refused unless --overwrite (run.json records the study)."""
    import torch

    from flowlab.trust_ood.certificate.evaluate import StudyConfig, save_study, train_study

    _choice(pde, PDES, "--pde")
    _choice(regressor, REGRESSORS, "--regressor")
    dev = device_option(device)
    cfg = StudyConfig(pde=pde, n=n, train_pairs=pairs, regressor_steps=regressor_steps, score_steps=score_steps,
                      regressor=regressor, ode_steps=ode_steps, seed=seed, sigma=25.0)  # fmt: skip
    try:
        cfg.pde_config()
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--n") from None
    claim_run_option(out, {"command": "trust train", "study": cfg.to_dict()}, overwrite=overwrite, resume=resume)
    models = train_study(cfg, device=dev, generator=torch.Generator().manual_seed(seed), progress=True)
    save_study(models, out)
    typer.echo(f"saved to {out} ({', '.join(f'{k}={v:.1f}' for k, v in models.timings.items())})")


@app.command()
def certify(
    run: Path = typer.Option(..., help="folder written by `flowlab trust train`"),
    family: str = typer.Option("param_shift", help=f"one of {FAMILIES}"),
    count: int = typer.Option(8, min=1, help="samples to certify"),
    variant: str = typer.Option("x&y", help=f"one of {CERTIFIED}"),
    seed: int = typer.Option(1, min=0),
    device: str = typer.Option("cpu"),
) -> None:
    """Certify `count` fresh samples of a family: score (bits/dim), threshold from 32 ID samples, OOD flag."""
    import torch

    from flowlab.trust_ood.certificate.evaluate import to_tensors
    from flowlab.trust_ood.certificate.pde1d import generate
    from flowlab.trust_ood.certificate.score import DensityModels, calibrate_threshold, certificate

    _choice(family, FAMILIES, "--family")
    _choice(variant, CERTIFIED, "--variant")
    device = device_option(device)
    models = _load(run, device)
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
    per_family: int | None = typer.Option(None, min=2, help="test samples per family (default: the study's)"),
    latency_batch: int = typer.Option(256, min=1, help="batch size of the latency measurement"),
    seed: int = typer.Option(1, min=0),
    device: str = typer.Option("cpu"),
) -> None:
    """Score every OOD family with the certificate and the baselines; print AUROC/ACC/FPR/Spearman tables."""
    import torch

    from flowlab.trust_ood.certificate.evaluate import evaluate_study, measure_latency

    if out is not None and out.is_dir():
        raise typer.BadParameter(f"{out} is a folder; expected the path of a JSON file", param_hint="--out")
    device = device_option(device)
    models = _load(run, device)
    if per_family is not None:
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
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json_text({"tables": result.tables, "latency": latency, "id_error": result.id_error}, indent=2))
