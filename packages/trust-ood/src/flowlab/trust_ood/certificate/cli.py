"""`flowlab trust train|certify|evaluate`: train the study's models (on a PDE's pairs or the user's arrays), certify
samples or the user's inputs, print the metric tables."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer

from flowlab.core.cli import (
    OVERWRITE_HELP,
    RESUME_HELP,
    choice_option,
    claim_run_option,
    device_option,
    json_text,
    option_error,
)
from flowlab.trust_ood.certificate.names import FAMILIES, METHODS, PDES, REGRESSORS, VARIANTS

app = typer.Typer(help="Joint-likelihood certificates of trust for PDE regression (JLBC).", no_args_is_help=True)


#: the variants `certify` scores with the trained models (the joint and the input-only one)
CERTIFIED = (*VARIANTS[:2], VARIANTS[3])


def _load(run: Path, device):
    """The study trained into `run`, every problem a typer error against --run."""
    from flowlab.trust_ood.certificate.evaluate import load_study

    try:
        return load_study(run, device=device)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err).removeprefix("run: "), param_hint="--run") from None


def _out_file(out: Path | None) -> None:
    if out is not None and out.is_dir():
        raise typer.BadParameter(f"{out} is a folder; expected the path of a JSON file", param_hint="--out")


def _not_with(option: str, value, other: str) -> None:
    if value is not None:
        raise typer.BadParameter(f"not used with {other}", param_hint=option)


def _arrays(path: Path, keys: tuple[str, ...], option: str) -> dict:
    """The arrays `keys` of the file or folder an option names (`arrays.load_arrays`), errors against `option`."""
    from flowlab.trust_ood.certificate.arrays import load_arrays

    try:
        return load_arrays(path, keys, name=option)
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix(f"{option}: "), param_hint=option) from None


def _given_regressor(cfg, path: Path, device):
    """Psi from a state_dict of the package's --regressor network (as the study builds it), errors against the
    option."""
    from flowlab.trust_ood.certificate.evaluate import load_weights_into

    fits = f"the --regressor {cfg.regressor} network (width {cfg.regressor_width})"
    try:
        return load_weights_into(cfg.make_regressor(), path, device=device, name="--regressor-weights", fits=fits)
    except ValueError as err:
        message = str(err).removeprefix("--regressor-weights: ")
        raise typer.BadParameter(message, param_hint="--regressor-weights") from None


@app.command()
def train(
    out: Path = typer.Option(..., help="folder for the trained models"),
    pde: str | None = typer.Option(None, help=f"one of {PDES} (default heat); not with --data"),
    data: Path | None = typer.Option(
        None,
        help="your ID pairs instead of a PDE's: an npz file of `inputs` and `outputs` (N, n), or a folder of "
        "inputs.npy and outputs.npy",
    ),
    n: int | None = typer.Option(None, help="grid size (even, at least 32; default 32); with --data, the arrays'"),
    pairs: int | None = typer.Option(None, min=1, help="training pairs (default 2000); with --data, all but --calib"),
    calib: int = typer.Option(32, min=2, help="ID samples that set the certify threshold (held out of --data)"),
    regressor_steps: int = typer.Option(600, min=1),
    score_steps: int = typer.Option(1200, min=1),
    regressor: str = typer.Option("fno", help=f"Psi's backbone, one of {REGRESSORS}"),
    regressor_weights: Path | None = typer.Option(
        None,
        help="with --data: certify this Psi instead of training one: a state_dict of the --regressor network "
        "as a study builds it (another run's regressor_0.pt)",
    ),
    ode_steps: int = typer.Option(12, min=1, help="rk4 steps of the likelihood ODE (log-sigma grid) when certifying"),
    seed: int = typer.Option(0, min=0),
    device: str = typer.Option("cpu"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Train the regressor Psi (FNO or CNN) with its ensemble, and the joint and input-only score models, on a PDE's
    pairs or on yours (--data; --regressor-weights: your Psi). The same study again needs --resume (it trains again to
    the same models: a study saves only at its end) or --overwrite; a different study in --out is refused unless
    --overwrite (run.json records the study)."""
    import torch

    from flowlab.core.train import data_fingerprint
    from flowlab.trust_ood.certificate.evaluate import StudyConfig, save_study, train_study
    from flowlab.trust_ood.certificate.user_study import array_study_config, fit_certificate

    choice_option(pde or PDES[0], PDES, "--pde")
    choice_option(regressor, REGRESSORS, "--regressor")
    dev = device_option(device)
    cfg = StudyConfig(pde=pde or PDES[0], n=32 if n is None else n, train_pairs=pairs or 2000, calib=calib,
                      regressor_steps=regressor_steps, score_steps=score_steps, regressor=regressor,
                      ode_steps=ode_steps, seed=seed, sigma=25.0)  # fmt: skip
    spec = {"command": "trust train"}
    if data is None:
        _not_with("--regressor-weights", regressor_weights, "a PDE study (it trains Psi and its ensemble); use --data")
        try:
            cfg.pde_config()
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--n") from None
    else:
        for option, value in (("--pde", pde), ("--n", n), ("--pairs", pairs)):
            _not_with(option, value, "--data (the arrays are the data)")
        arrays = _arrays(data, ("inputs", "outputs"), "--data")
        psi = None if regressor_weights is None else _given_regressor(cfg, regressor_weights, dev)
        try:
            cfg = array_study_config(cfg, arrays["inputs"].shape, own_regressor=psi is not None)
        except ValueError as err:
            raise option_error(err, {"inputs": "--data", "calib": "--calib"}, where=str(data)) from None
        tensors = [torch.from_numpy(a) for a in arrays.values()]
        if psi is not None:
            tensors += [t.cpu() for t in psi.state_dict().values()]
        spec["data"] = data_fingerprint(*tensors)
    claim_run_option(out, spec | {"study": cfg.to_dict()}, overwrite=overwrite, resume=resume)
    g = torch.Generator().manual_seed(seed)
    if data is None:
        models = train_study(cfg, device=dev, generator=g, progress=True)
    else:
        models = fit_certificate(arrays["inputs"], arrays["outputs"], regressor=psi, config=cfg, device=dev,
                                 generator=g, progress=True)  # fmt: skip
    save_study(models, out)
    typer.echo(f"saved to {out} ({', '.join(f'{k}={v:.1f}' for k, v in models.timings.items())})")


@app.command()
def certify(
    run: Path = typer.Option(..., help="folder written by `flowlab trust train`"),
    inputs: Path | None = typer.Option(
        None,
        help="a run trained on --data: the inputs to certify, an npz file of `inputs` (B, n) or a folder of inputs.npy",
    ),
    family: str | None = typer.Option(None, help=f"a PDE's run: one of {FAMILIES} (default param_shift)"),
    count: int | None = typer.Option(None, min=1, help="a PDE's run: samples of --family to certify (default 8)"),
    variant: str = typer.Option("x&y", help=f"one of {CERTIFIED}"),
    out: Path | None = typer.Option(None, help="write the threshold, scores and OOD flags as JSON here"),
    seed: int = typer.Option(1, min=0),
    device: str = typer.Option("cpu"),
) -> None:
    """Certify inputs: yours (--inputs, a run trained on --data; the threshold from its held-out ID inputs) or fresh
    samples of a PDE's family (the threshold from fresh ID samples, as many as train's --calib). Prints each score
    (bits/dim) with its OOD flag."""
    import torch

    from flowlab.trust_ood.certificate.evaluate import to_tensors
    from flowlab.trust_ood.certificate.pde1d import generate
    from flowlab.trust_ood.certificate.user_study import calibrated_certificate
    from flowlab.trust_ood.certificate.user_study import certify as certify_arrays

    if family is not None:
        choice_option(family, FAMILIES, "--family")
    choice_option(variant, CERTIFIED, "--variant")
    _out_file(out)
    device = device_option(device)
    models = _load(run, device)
    cfg = models.config
    g = torch.Generator().manual_seed(seed)
    if cfg.pde is None:
        _not_with("--family", family, "a run trained on --data; certify your inputs with --inputs")
        _not_with("--count", count, "a run trained on --data; certify your inputs with --inputs")
        if inputs is None:
            raise typer.BadParameter(f"{run} was trained on --data: give the inputs to certify", param_hint="--inputs")
        x = _arrays(inputs, ("inputs",), "--inputs")["inputs"]
        if x.shape[1] != cfg.n:
            raise typer.BadParameter(f"{inputs}: expected grid size {cfg.n} (the run's), got {x.shape[1]}",
                                     param_hint="--inputs")  # fmt: skip
        res = certify_arrays(models, x, variant=variant, generator=g)
        source, names = str(inputs), [f"inputs[{i}]" for i in range(len(x))]
    else:
        _not_with("--inputs", inputs, f"a {cfg.pde} run (its Psi needs the task parameter); use --family")
        family, count = family or "param_shift", count or 8
        pde = cfg.pde_config()
        xc, pc, _ = to_tensors(generate(pde, "id", cfg.calib, seed=seed + 1000), models.param_scale, device)
        x, p, _ = to_tensors(generate(pde, family, count, seed=seed), models.param_scale, device)
        res = calibrated_certificate(models, x, p, xc, pc, variant=variant, generator=g)
        source, names = family, [f"{family}[{i}]" for i in range(count)]
    typer.echo(f"threshold (median - 1.5 std of {cfg.calib} ID samples): {res.threshold:.4f} bits/dim")
    for name, s, ood in zip(names, res.scores.tolist(), res.ood.tolist(), strict=True):
        typer.echo(f"{name}  certificate {s:.4f}  {'OOD' if ood else 'ok'}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {"run": str(run), "source": source, "variant": variant, "threshold": res.threshold,
                  "scores": res.scores.tolist(), "ood": res.ood.tolist()}  # fmt: skip
        out.write_text(json_text(record, indent=2))


@app.command()
def evaluate(
    run: Path = typer.Option(..., help="folder written by `flowlab trust train`"),
    out: Path | None = typer.Option(None, help="write the tables as JSON here"),
    per_family: int | None = typer.Option(None, min=2, help="test samples per family (default: the study's)"),
    latency_batch: int = typer.Option(256, min=1, help="batch size of the latency measurement"),
    seed: int = typer.Option(1, min=0),
    device: str = typer.Option("cpu"),
) -> None:
    """Score every OOD family of a PDE's run with the certificate and the baselines; print AUROC/ACC/FPR/Spearman
    tables."""
    import torch

    from flowlab.trust_ood.certificate.evaluate import evaluate_study, measure_latency

    _out_file(out)
    device = device_option(device)
    models = _load(run, device)
    if models.config.pde is None:
        message = f"{run} was trained on --data: no OOD families to evaluate; certify shifted inputs with --inputs"
        raise typer.BadParameter(message, param_hint="--run")
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
