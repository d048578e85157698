"""`flowlab molecular sample|metad|evaluate` for WT-ASBS.

A run folder holds config.json (method, system, settings), samples.pt (X_1, CVs, bias at the samples, path-space
log importance weights), state.pt
(the controller, corrector and bias grids; tensors only) or, for `metad`, fes.pt and cvs.pt.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowlab.molecular.wt_asbs.names import TOYS

if TYPE_CHECKING:
    import torch

app = typer.Typer(help="WT-ASBS: train and sample (sample), the OpenMM WTMetaD reference (metad), evaluate a run.")

SYSTEMS = ("aldp", "sn2", *TOYS)
WEIGHTS = ("path", "bias", "none")


@app.command()
def sample(
    system: Annotated[str, typer.Option(help="|".join(SYSTEMS))] = "four-well",
    bias: Annotated[str, typer.Option(help="on (WT-ASBS) | off (ASBS)")] = "on",
    out: Annotated[Path, typer.Option(help="run folder")] = Path("runs/wt_asbs"),
    variant: Annotated[str, typer.Option(help="quick|full settings of the benchmark")] = "quick",
    n: Annotated[int, typer.Option(help="samples to draw after training")] = 2000,
    seed: int = 0,
    data_root: Annotated[str | None, typer.Option(help="defaults to $FLOWLAB_DATA")] = None,
) -> None:
    """Train the (WT-)ASBS sampler on a system and draw samples."""
    import torch

    from flowlab.molecular.wt_asbs.aldp import aldp_files, torsion_bias, torsion_cvs
    from flowlab.molecular.wt_asbs.asbs import ASBS
    from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP
    from flowlab.molecular.wt_asbs.benchmarks.sn2 import SN2
    from flowlab.molecular.wt_asbs.benchmarks.toy import TOY
    from flowlab.molecular.wt_asbs.potentials import OpenMMPotential
    from flowlab.molecular.wt_asbs.sn2 import REACTANT, reaction_cv, sn2_potential
    from flowlab.molecular.wt_asbs.toys import make_toy, toy_bias, toy_cvs, toy_source_mean

    if system not in SYSTEMS:
        raise typer.BadParameter(f"expected one of {SYSTEMS}, got {system!r}", param_hint="--system")
    if bias not in ("on", "off"):
        raise typer.BadParameter(f"expected on|off, got {bias!r}", param_hint="--bias")
    if variant not in ("quick", "full"):
        raise typer.BadParameter(f"expected quick|full, got {variant!r}", param_hint="--variant")
    gen = torch.Generator().manual_seed(seed)
    if system == "aldp":
        cfg = ALDP.variants[variant]
        sampler = cfg.sampler
        prmtop, inpcrd = aldp_files(data_root)
        pot = OpenMMPotential(prmtop, solvent=cfg.solvent, workers=cfg.workers)
        cvs, wt = torsion_cvs(), torsion_bias(sampler.bias, pot.kT)
        kw = {"source_mean": pot.positions(inpcrd)[0].float(), "atom_dim": 3}
    elif system == "sn2":
        cfg = SN2.variants[variant]
        sampler = cfg.sampler
        pot, cvs = sn2_potential(workers=cfg.workers), reaction_cv()
        wt = sampler.bias.build(*cfg.grid_range, kT=pot.kT)
        kw = {"source_mean": REACTANT[0].float(), "atom_dim": 3}
    else:
        sampler = TOY.variants[variant].sampler_for(system)
        pot = make_toy(system)
        cvs, wt = toy_cvs(pot), toy_bias(pot, sampler.bias)
        kw = {"source_mean": toy_source_mean(pot)}
    model = ASBS.from_config(
        pot, sampler, cvs=cvs if bias == "on" else None, bias=wt if bias == "on" else None, generator=gen, **kw
    )
    log = model.train()
    data = {}
    if system in TOYS:  # path weights cost one energy call per sample; on molecules they are not used by default
        _, x1, data["log_w"] = model.sample_weighted(n)
    else:
        _, x1 = model.sample(n)
    s = cvs(x1.double())
    v = wt(s).value if bias == "on" else torch.zeros(len(s), dtype=torch.float64)
    out.mkdir(parents=True, exist_ok=True)
    torch.save({"x": x1, "cvs": s, "bias": v, **data}, out / "samples.pt")
    torch.save(model.state_dict(), out / "state.pt")
    config = {
        "method": "wt_asbs" if bias == "on" else "asbs",
        "system": system,
        "variant": variant,
        "seed": seed,
        "kT": pot.kT,
        "energy_evals": pot.n_evals,
        "train_seconds": log.seconds,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    typer.echo(json.dumps(config))


def finite_json(value):
    """`value` with every non-finite float (a basin no sample reached) as None, so the report is valid JSON."""
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@app.command()
def metad(
    system: Annotated[str, typer.Option(help="aldp")] = "aldp",
    out: Annotated[Path, typer.Option(help="run folder")] = Path("runs/metad"),
    steps: Annotated[int, typer.Option(help="2 fs MD steps")] = 25000,
    bias_factor: float = 8.0,
    height: Annotated[float, typer.Option(help="hill height, kJ/mol")] = 1.0,
    seed: int = 0,
    data_root: Annotated[str | None, typer.Option(help="defaults to $FLOWLAB_DATA")] = None,
) -> None:
    """OpenMM well-tempered metadynamics over (phi, psi) of alanine dipeptide (the reference)."""
    import torch

    from flowlab.molecular.wt_asbs.aldp import aldp_files
    from flowlab.molecular.wt_asbs.reference import openmm_wtmetad

    if system != "aldp":
        raise typer.BadParameter("only aldp (toys: see `flowlab bench --only mol.wt_asbs.toy`)", param_hint="--system")
    prmtop, inpcrd = aldp_files(data_root)
    try:
        res = openmm_wtmetad(
            prmtop, inpcrd, steps=steps, solvent="OBC1", bias_factor=bias_factor, height=height, seed=seed
        )
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    out.mkdir(parents=True, exist_ok=True)
    torch.save({"fes": torch.as_tensor(res.fes)}, out / "fes.pt")
    torch.save({"cvs": torch.as_tensor(res.cvs)}, out / "samples.pt")
    config = {
        "method": "metad",
        "system": "aldp",
        "steps": steps,
        "seed": seed,
        "kT": 0.0083144626 * 300.0,
        "energy_evals": res.energy_evals,
        "seconds": res.seconds,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    typer.echo(json.dumps(config))


def _sample_weights(data: dict, cfg: dict, method: str, weights: str | None) -> tuple[str, torch.Tensor | None]:
    """(the estimator's name, normalised sample weights (N,) or None for unweighted samples) for `evaluate`."""
    import torch

    from flowlab.molecular.wt_asbs.analysis import reweight

    if weights is None:
        weights = "path" if "log_w" in data else ("bias" if method == "wt_asbs" else "none")
    if weights not in WEIGHTS:
        raise typer.BadParameter(f"expected one of {WEIGHTS}, got {weights!r}", param_hint="--weights")
    if weights == "path":
        if "log_w" not in data:
            msg = "samples.pt has no path weights (`sample` writes them on the toys)"
            raise typer.BadParameter(msg, param_hint="--weights")
        return weights, torch.softmax(data["log_w"].double(), 0)
    if weights == "bias":
        if method != "wt_asbs":
            raise typer.BadParameter("bias weights need a WT-ASBS run (--bias on)", param_hint="--weights")
        return weights, reweight(data["bias"], cfg["kT"])
    return weights, None


@app.command()
def evaluate(
    run: Annotated[Path, typer.Argument(help="a run folder written by `sample` or `metad`")],
    method: Annotated[str | None, typer.Option(help="override the run's method")] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            help="path (importance weights; the default where `sample` wrote them: the toys) | bias (exp(V/kT), "
            "WT-ASBS; the default otherwise) | none"
        ),
    ] = None,
) -> None:
    """Delta F between basins, basin coverage and energy-evaluation counts of a run (printed as JSON)."""
    from flowlab.core.train import load_weights
    from flowlab.molecular.wt_asbs.aldp import ALDP_BASINS, basin_df_from_fes
    from flowlab.molecular.wt_asbs.analysis import basin_coverage, delta_f_from_samples
    from flowlab.molecular.wt_asbs.sn2 import WELLS, well_fractions
    from flowlab.molecular.wt_asbs.toys import TOY_INTERVALS, make_toy

    cfg_path = run / "config.json"
    if not cfg_path.is_file():
        raise typer.BadParameter(f"no config.json in {run}", param_hint="RUN")
    try:
        cfg = json.loads(cfg_path.read_text())
    except json.JSONDecodeError as err:
        raise typer.BadParameter(f"{cfg_path} is not valid JSON ({err})", param_hint="RUN") from err
    missing = sorted({"system", "kT", "energy_evals"} - set(cfg)) if isinstance(cfg, dict) else ["a JSON object"]
    if missing:
        raise typer.BadParameter(
            f"{cfg_path} lacks {', '.join(missing)} (written by `sample` or `metad`)", param_hint="RUN"
        )
    method = method or cfg.get("method")
    if method not in ("wt_asbs", "asbs", "metad"):
        raise typer.BadParameter(f"unknown method {method!r} (expected wt_asbs|asbs|metad)", param_hint="--method")
    try:
        data = load_weights(run / "samples.pt", name="--run")
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--run") from err
    s = data["cvs"].double()
    if method == "metad":  # biased trajectory: Delta F from the FES, not from raw samples
        try:
            fes = load_weights(run / "fes.pt", name="--run")["fes"].numpy()
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--run") from err
        report = {"method": method, "system": "aldp", "energy_evals": cfg["energy_evals"]}
        report.update({f"{k}_kjmol": v for k, v in basin_df_from_fes(fes, cfg["kT"]).items()})
        typer.echo(json.dumps(finite_json(report)))
        return
    weights, w = _sample_weights(data, cfg, method, weights)
    report = {"method": method, "system": cfg["system"], "energy_evals": cfg["energy_evals"], "weights": weights}
    if w is not None:
        report["ess_frac"] = float(1 / (w**2).sum()) / len(w)
    if cfg["system"] == "aldp":
        for name, box in ALDP_BASINS.items():
            if name != "C7eq":
                report[f"dF_{name}_kjmol"] = cfg["kT"] * delta_f_from_samples(s, ALDP_BASINS["C7eq"], box, weights=w)
    elif cfg["system"] == "sn2":
        xi = s[:, 0]
        report["dF_product_kT"] = delta_f_from_samples(xi, WELLS["reactant"], WELLS["product"], weights=w)
        report["well_fractions"] = well_fractions(xi, w)
    else:
        a, b = TOY_INTERVALS[cfg["system"]]
        pot = make_toy(cfg["system"])
        report["dF_kT"] = delta_f_from_samples(s[:, 0], a, b, weights=w)
        report["basins_found"], report["basin_counts"] = basin_coverage(data["x"], pot.minima, pot.basin_radius)
    typer.echo(json.dumps(finite_json(report)))
