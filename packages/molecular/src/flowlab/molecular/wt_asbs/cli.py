"""`flowlab molecular sample|metad|evaluate|export` for WT-ASBS.

A run folder holds config.json (method, system, settings), samples.pt (X_1, CVs, bias at the samples, path-space
log importance weights), state.pt
(the controller, corrector and bias grids; tensors only) or, for `metad`, fes.pt and samples.pt (the recorded
positions and CVs), and the
run.json of the run it holds: the same run again needs --resume (it runs again to the same result: neither
command checkpoints mid-run) or --overwrite, another run needs --overwrite. `export` writes a run's samples as a
PDB, DCD or XYZ trajectory (the extension decides); `evaluate --plot` draws an alanine dipeptide run's FES. `sample
--system FILE.prmtop|FILE.xml --positions FILE.inpcrd|FILE.pdb --cv dihedral:i,j,k,l` samples a user's molecule
along one or two of its torsions (config.json: system "user", its files and its CVs).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, SEEDS, json_text
from flowlab.molecular.wt_asbs.names import (
    POSITION_SUFFIXES,
    SYSTEM_SUFFIXES,
    TOYS,
    TRAJECTORY_SUFFIXES,
    USER_SYSTEM,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from flowlab.molecular.wt_asbs.asbs import TrainLog
    from flowlab.molecular.wt_asbs.dihedrals import DihedralSystem

app = typer.Typer(
    help="WT-ASBS: train and sample (sample), the OpenMM WTMetaD reference (metad), evaluate a run, export its samples."
)

SYSTEMS = ("aldp", "sn2", *TOYS)
METHODS = ("wt_asbs", "asbs", "metad")
WEIGHTS = ("path", "bias", "none")


def _suffix(path: Path, suffixes: tuple[str, ...], option: str) -> None:
    """Refuse a file whose extension (which decides the writer) is not one of `suffixes`, or a folder."""
    if path.suffix not in suffixes or path.is_dir():
        raise typer.BadParameter(f"expected a {'|'.join(suffixes)} file, got {path.name!r}", param_hint=option)


def _aldp_data(data_root: str | None) -> tuple[Path, Path]:
    """(prmtop, inpcrd) of alanine dipeptide under `data_root`, read once to check them: a missing folder or file,
    or one OpenMM cannot read, is reported against --data-root."""
    from flowlab.molecular.wt_asbs.aldp import aldp_files
    from flowlab.molecular.wt_asbs.potentials import read_inpcrd, read_prmtop

    try:
        prmtop, inpcrd = aldp_files(data_root)
        read_inpcrd(inpcrd, read_prmtop(prmtop).topology.getNumAtoms())
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="--data-root") from err
    return prmtop, inpcrd


def _user_files(system: str, positions: Path | None, cv: list[str] | None) -> tuple[Path, Path, list] | None:
    """(system file, positions file, torsions) of `sample --system FILE`, None for a named system; the options
    checked before anything is read (a named system takes neither --positions nor --cv)."""
    from flowlab.molecular.wt_asbs.dihedrals import parse_cv

    if system in SYSTEMS:
        for given, option in ((positions, "--positions"), (cv, "--cv")):
            if given:
                raise typer.BadParameter(f"only with a --system FILE ({'|'.join(SYSTEM_SUFFIXES)})", param_hint=option)
        return None
    if Path(system).suffix not in SYSTEM_SUFFIXES:
        msg = f"expected one of {SYSTEMS} or a {'|'.join(SYSTEM_SUFFIXES)} file, got {system!r}"
        raise typer.BadParameter(msg, param_hint="--system")
    if positions is None:
        msg = f"a --system file needs its starting positions, a {'|'.join(POSITION_SUFFIXES)} file"
        raise typer.BadParameter(msg, param_hint="--positions")
    _suffix(positions, POSITION_SUFFIXES, "--positions")
    if not cv or len(cv) > 2:
        msg = f"a --system file needs one or two --cv dihedral:i,j,k,l, got {len(cv or [])}"
        raise typer.BadParameter(msg, param_hint="--cv")
    try:
        torsions = [parse_cv(c) for c in cv]
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix("cv: "), param_hint="--cv") from err
    return Path(system).resolve(), positions.resolve(), torsions


def _molecule(system: Path, positions: Path, torsions: list, solvent: str | None, workers: int) -> DihedralSystem:
    """`dihedral_system` for `sample`, its errors against --system, --positions (the file named) or --cv."""
    from flowlab.core.cli import option_error
    from flowlab.molecular.wt_asbs.dihedrals import dihedral_system

    options = {"system": "--system", "prmtop": "--system", "xml": "--system", "positions": "--positions",
               "inpcrd": "--positions", "pdb": "--positions", "cv": "--cv"}  # fmt: skip
    try:
        return dihedral_system(system, positions, torsions, solvent=solvent, workers=workers)
    except (FileNotFoundError, ValueError) as err:
        raise option_error(err, options) from err


def _progress(epochs: int) -> Callable[[TrainLog], None]:
    """`ASBS.train`'s per-epoch callback for the command line: a line on stderr about every 5% of the `epochs` and
    at the last (epoch, stage, loss, energy calls so far, hills)."""
    every = max(1, epochs // 20)

    def report(log: TrainLog) -> None:
        done = len(log.stage)
        if done % every == 0 or done == epochs:
            typer.echo(f"epoch {done}/{epochs} ({log.stage[-1]}): loss {log.loss[-1]:.4g}, energy calls "
                       f"{log.energy_evals[-1]}, hills {log.hills[-1]}", err=True)  # fmt: skip

    return report


@app.command()
def sample(
    system: Annotated[
        str, typer.Option(help=f"{'|'.join(SYSTEMS)}, or a user's {'|'.join('FILE' + s for s in SYSTEM_SUFFIXES)}")
    ] = "four-well",
    positions: Annotated[
        Path | None,
        typer.Option(help=f"a --system FILE's starting positions: FILE{'|FILE'.join(POSITION_SUFFIXES)}"),
    ] = None,
    cv: Annotated[
        list[str] | None,
        typer.Option(help="a --system FILE's CV, dihedral:i,j,k,l (0-based atom indices); once or twice"),
    ] = None,
    bias: Annotated[str, typer.Option(help="on (WT-ASBS) | off (ASBS)")] = "on",
    out: Annotated[Path, typer.Option(help="run folder")] = Path("runs/wt_asbs"),
    variant: Annotated[
        str,
        typer.Option(
            help="quick|full settings of the benchmark; aldp and sn2 also cpu (internal coordinates, d = 60 and 12)"
        ),
    ] = "quick",
    n: Annotated[int, typer.Option(min=1, help="samples to draw after training")] = 2000,
    steps: Annotated[
        int | None,
        typer.Option(
            help="AdamW steps in all, spread evenly over the curriculum's epochs (a multiple of their count; "
            "default: the variant's)"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(**SEEDS)] = 0,
    data_root: Annotated[str | None, typer.Option(help="defaults to $FLOWLAB_DATA")] = None,
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train the (WT-)ASBS sampler on a system and draw samples, printing progress per epoch (stderr). A user's
    molecule (--system FILE --positions FILE --cv ...) takes alanine dipeptide's settings. A folder holding this run
    needs --resume or --overwrite, one holding another run --overwrite."""
    from dataclasses import replace

    import torch

    from flowlab.core.cli import claim_run_option, option_error
    from flowlab.molecular.wt_asbs.aldp import PHI, PSI, cv_source_std, internal_system
    from flowlab.molecular.wt_asbs.asbs import ASBS
    from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP
    from flowlab.molecular.wt_asbs.benchmarks.sn2 import SN2
    from flowlab.molecular.wt_asbs.benchmarks.sn2_runs import reactant_md
    from flowlab.molecular.wt_asbs.benchmarks.toy import TOY
    from flowlab.molecular.wt_asbs.dihedrals import cv_name, dihedral_bias
    from flowlab.molecular.wt_asbs.sn2 import REACTANT, internal_source, reaction_cv, sn2_potential
    from flowlab.molecular.wt_asbs.sn2 import internal_system as sn2_internal_system
    from flowlab.molecular.wt_asbs.toys import make_toy, toy_bias, toy_cvs, toy_source_mean

    files = _user_files(system, positions, cv)
    to_x = torch.as_tensor  # samples are positions, except on internal coordinates
    warm_data = None  # the warm start's data (SN2: plain MD in the reactant well)
    if bias not in ("on", "off"):
        raise typer.BadParameter(f"expected on|off, got {bias!r}", param_hint="--bias")
    molecule = files is not None or system == "aldp"
    choices = ("quick", "cpu", "full") if system in ("aldp", "sn2") else ("quick", "full")
    if variant not in choices:
        msg = f"expected {'|'.join(choices)} for --system {system}, got {variant!r}"
        raise typer.BadParameter(msg, param_hint="--variant")
    cfg = (ALDP if molecule else {"sn2": SN2}.get(system, TOY)).variants[variant]
    sampler = cfg.sampler_for(system) if system in TOYS else cfg.sampler
    if steps is not None:
        try:
            sampler = replace(sampler, asbs=sampler.asbs.with_steps(steps))
        except ValueError as err:
            raise option_error(err) from err
    gen = torch.Generator().manual_seed(seed)
    user = {}
    if molecule:  # alanine dipeptide, or a user's molecule with its torsions
        system_file, positions_file, torsions = files or (*_aldp_data(data_root), [PHI, PSI])
        solvent = cfg.solvent if system_file.suffix == ".prmtop" else None  # an XML system has its own
        mol = _molecule(system_file, positions_file, torsions, solvent, cfg.workers)
        pot, cvs, wt = mol.potential, mol.cvs, dihedral_bias(sampler.bias, mol.potential.kT, len(mol.cvs))
        kw = {"source_mean": mol.positions[0].float(), "atom_dim": 3}
        if cfg.coordinates == "internal":  # the cpu variant: the peptide on internal coordinates
            pot, cvs = internal_system(mol.potential, mol.positions, cfg.torsion_scale)
            kw = {"atom_dim": 1, "source_std": cv_source_std(pot, cvs, sampler.source_std, cfg.cv_source_std)}
            to_x = pot.cartesian
        if files is not None:
            system = USER_SYSTEM
            user = {"system_file": str(system_file), "positions_file": str(positions_file),
                    "cvs": [cv_name(t) for t in torsions], "solvent": solvent}  # fmt: skip
    elif system == "sn2":
        pot, cvs = sn2_potential(workers=cfg.workers, wall_nm=cfg.wall_nm, wall_k=cfg.wall_k), reaction_cv()
        wt = sampler.bias.build(*cfg.grid_range, kT=pot.kT)
        kw = {"source_mean": REACTANT[0].float(), "atom_dim": 3}
        if sampler.asbs.warm_start_steps:
            warm_data = reactant_md(cfg, pot, torch.Generator().manual_seed(seed)).samples
        if cfg.coordinates == "internal":  # the cpu variant: the complex on affine internal coordinates
            pot, cvs = sn2_internal_system(pot, reaction_units=cfg.reaction_units)
            mean, std = internal_source(pot, sampler.source_std, cfg.cv_source_std)
            kw, to_x = {"source_mean": mean, "atom_dim": 1, "source_std": std}, pot.cartesian
            warm_data = None if warm_data is None else pot.z(warm_data)
    else:
        pot = make_toy(system)
        cvs, wt = toy_cvs(pot), toy_bias(pot, sampler.bias)
        kw = {"source_mean": toy_source_mean(pot)}
    spec = {"command": "molecular sample", "system": system, "bias": bias, "variant": variant, "n": n, "seed": seed,
            "sampler": sampler.to_dict(), **user}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    model = ASBS.from_config(
        pot, sampler, cvs=cvs if bias == "on" else None, bias=wt if bias == "on" else None, generator=gen, **kw
    )
    if warm_data is not None:
        model.warm_start(warm_data)
    log = model.train(on_epoch=_progress(sampler.asbs.epochs))
    if log.stopped_epoch is not None:
        typer.echo(f"stopped as diverging after epoch {log.stopped_epoch}: its new samples stayed over "
                   f"{sampler.asbs.stop_above_kT:g} kT above its best epoch's median energy", err=True)  # fmt: skip
    data = {}
    if system in TOYS:  # path weights cost one energy call per sample; on molecules they are not used by default
        _, x1, data["log_w"] = model.sample_weighted(n)
    else:
        _, x1 = model.sample(n)
    s = cvs(x1.double())
    v = wt(s).value if bias == "on" else torch.zeros(len(s), dtype=torch.float64)
    torch.save({"x": to_x(x1.double()).to(x1.dtype), "cvs": s, "bias": v, **data}, out / "samples.pt")
    torch.save(model.state_dict(), out / "state.pt")
    config = {
        "method": "wt_asbs" if bias == "on" else "asbs",
        "system": system,
        **user,
        "variant": variant,
        "seed": seed,
        "kT": pot.kT,
        "energy_evals": pot.n_evals,
        "train_steps": sampler.asbs.steps,
        "samples_seen": sampler.asbs.steps * sampler.asbs.batch_size,
        "train_seconds": log.seconds,
        "stopped_epoch": log.stopped_epoch,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    typer.echo(json_text(config))


@app.command()
def metad(
    system: Annotated[str, typer.Option(help="aldp")] = "aldp",
    out: Annotated[Path, typer.Option(help="run folder")] = Path("runs/metad"),
    steps: Annotated[int, typer.Option(help="2 fs MD steps (at least 100)")] = 25000,
    bias_factor: float = 8.0,
    height: Annotated[float, typer.Option(help="hill height, kJ/mol")] = 1.0,
    seed: Annotated[int, typer.Option(**SEEDS)] = 0,
    data_root: Annotated[str | None, typer.Option(help="defaults to $FLOWLAB_DATA")] = None,
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """OpenMM well-tempered metadynamics over (phi, psi) of alanine dipeptide (the reference). A folder holding
    this run needs --resume or --overwrite, one holding another run --overwrite."""
    import torch

    from flowlab.core.cli import claim_run_option, option_error
    from flowlab.molecular.wt_asbs.reference import check_metad, openmm_wtmetad

    if system != "aldp":
        raise typer.BadParameter("only aldp (toys: see `flowlab bench --only mol.wt_asbs.toy`)", param_hint="--system")
    try:
        check_metad(steps=steps, bias_factor=bias_factor, height=height)
    except ValueError as err:
        raise option_error(err) from err
    spec = {"command": "molecular metad", "system": system, "steps": steps, "bias_factor": bias_factor,
            "height": height, "seed": seed}  # fmt: skip
    claim_run_option(
        out, spec, overwrite=overwrite, resume=resume
    )  # a run that stops at bad data leaves only run.json: free
    prmtop, inpcrd = _aldp_data(data_root)
    res = openmm_wtmetad(prmtop, inpcrd, steps=steps, solvent="OBC1", bias_factor=bias_factor, height=height, seed=seed)
    torch.save({"fes": torch.as_tensor(res.fes)}, out / "fes.pt")
    torch.save({"x": torch.as_tensor(res.x), "cvs": torch.as_tensor(res.cvs)}, out / "samples.pt")
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
    typer.echo(json_text(config))


def _config_problem(cfg: object) -> str | None:
    """What is wrong with a run's parsed config.json (None: nothing)."""
    if not isinstance(cfg, dict):
        return f"expected a JSON object, got {type(cfg).__name__}"
    missing = sorted({"system", "kT", "energy_evals"} - set(cfg))
    if missing:
        return f"lacks {', '.join(missing)}"
    if cfg["system"] not in (*SYSTEMS, USER_SYSTEM):
        return f"system: expected one of {(*SYSTEMS, USER_SYSTEM)}, got {cfg['system']!r}"
    if cfg["system"] == USER_SYSTEM:
        cvs, files = cfg.get("cvs"), [cfg.get(k) for k in ("system_file", "positions_file")]
        if not isinstance(cvs, list) or not 1 <= len(cvs) <= 2 or not all(isinstance(c, str) for c in cvs):
            return f"cvs: expected one or two CV names (dihedral:i,j,k,l), got {cvs!r}"
        if not all(isinstance(f, str) for f in files):
            return f"system_file, positions_file: expected the paths of a user's system, got {files!r}"
    if cfg.get("method", METHODS[0]) not in METHODS:
        return f"method: expected one of {METHODS}, got {cfg['method']!r}"
    kT, evals = cfg["kT"], cfg["energy_evals"]
    if isinstance(kT, bool) or not isinstance(kT, (int, float)) or not (math.isfinite(kT) and kT > 0):
        return f"kT: expected a positive number (kJ/mol or kT units), got {kT!r}"
    if isinstance(evals, bool) or not isinstance(evals, int) or evals < 0:
        return f"energy_evals: expected a count >= 0, got {evals!r}"
    return None


def _run_config(run: Path) -> dict:
    """The checked config.json of a run folder (errors against RUN)."""
    path = run / "config.json"
    if not path.is_file():
        raise typer.BadParameter(f"no config.json in {run}", param_hint="RUN")
    try:
        cfg = json.loads(path.read_text())
    except ValueError as err:  # not JSON, or not text at all
        raise typer.BadParameter(f"{path} is not valid JSON ({err})", param_hint="RUN") from err
    problem = _config_problem(cfg)
    if problem is not None:
        raise typer.BadParameter(f"{path}: {problem} (written by `sample` or `metad`)", param_hint="RUN")
    return cfg


def _run_tensors(
    path: Path, shapes: dict[str, tuple[int | str | None, ...]], optional: tuple[str, ...] = ()
) -> dict[str, torch.Tensor]:
    """The tensors `shapes` names in the file `path` of a run (those in `optional` where present; errors against
    RUN), each finite and of its shape: per dimension a size, None (any) or a symbol ("N": the sample count) whose
    size is the same wherever it is used and positive."""
    import torch

    from flowlab.core.cli import load_weights_option

    def fail(problem: str) -> typer.BadParameter:
        return typer.BadParameter(f"{path}: {problem} (written by `sample` or `metad`)", param_hint="RUN")

    data = load_weights_option(path, "RUN")
    if not isinstance(data, dict):
        raise fail(f"expected a dict of tensors, got {type(data).__name__}")
    shapes = {key: shape for key, shape in shapes.items() if key in data or key not in optional}
    sizes: dict[str, set[int]] = {}
    for key, shape in shapes.items():
        t = data.get(key)
        if not isinstance(t, torch.Tensor):
            raise fail(f"{key}: expected a tensor, got {type(t).__name__}")
        if t.dim() != len(shape) or any(isinstance(s, int) and s != m for s, m in zip(shape, t.shape)):
            raise fail(f"{key}: expected shape ({', '.join(str(s or '*') for s in shape)}), got {tuple(t.shape)}")
        if not bool(torch.isfinite(t).all()):
            raise fail(f"{key}: contains NaN or inf values")
        for s, m in zip(shape, t.shape):
            if isinstance(s, str):
                sizes.setdefault(s, set()).add(m)
    for symbol, found in sizes.items():
        if len(found) > 1 or 0 in found:
            keys = [k for k, shape in shapes.items() if symbol in shape]
            raise fail(f"{', '.join(keys)}: expected the same positive size {symbol}, got sizes {sorted(found)}")
    return {key: data[key] for key in shapes}


def _samples(run: Path, system: str, cvs: list[str] | None = None) -> dict[str, torch.Tensor]:
    """samples.pt of a `sample` run: x (N, D) (D: a toy's dimension), cvs (N, K) (K: the system's CVs, a user's
    `cvs` names), bias (N,) and, where written, log_w (N,)."""
    from flowlab.molecular.wt_asbs.toys import make_toy

    dim = make_toy(system).dim if system in TOYS else None
    k = len(cvs) if cvs else (2 if system == "aldp" else 1)
    shapes = {"x": ("N", dim), "cvs": ("N", k), "bias": ("N",), "log_w": ("N",)}
    return _run_tensors(run / "samples.pt", shapes, optional=("log_w",))


def _sample_weights(data: dict, cfg: dict, method: str, weights: str | None) -> tuple[str, torch.Tensor | None]:
    """(the estimator's name, normalised sample weights (N,) or None for unweighted samples) for `evaluate`."""
    import torch

    from flowlab.molecular.wt_asbs.analysis import reweight

    if weights is None:
        weights = "path" if "log_w" in data else ("bias" if method == "wt_asbs" else "none")
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
    plot: Annotated[
        Path | None,
        typer.Option(
            help="also draw the (phi, psi) FES of an alanine dipeptide run here (.png): metad's fes.pt, or the "
            "samples' histogram under --weights (a user's run: over its two --cv)"
        ),
    ] = None,
) -> None:
    """Delta F between basins, basin coverage and energy-evaluation counts of a run (printed as JSON; a user's
    molecule: its CVs and the ESS); --plot draws the free-energy surface of an alanine dipeptide run, or of a user's
    run over its two CVs."""
    from flowlab.molecular.wt_asbs.aldp import ALDP_BASINS, basin_df_from_fes
    from flowlab.molecular.wt_asbs.analysis import basin_coverage, delta_f_from_samples
    from flowlab.molecular.wt_asbs.dihedrals import fes_from_samples
    from flowlab.molecular.wt_asbs.plots import plot_fes
    from flowlab.molecular.wt_asbs.sn2 import WELLS, well_fractions
    from flowlab.molecular.wt_asbs.toys import TOY_INTERVALS, make_toy

    if method not in (None, *METHODS):
        raise typer.BadParameter(f"unknown method {method!r} (expected {'|'.join(METHODS)})", param_hint="--method")
    if weights not in (None, *WEIGHTS):
        raise typer.BadParameter(f"expected one of {WEIGHTS}, got {weights!r}", param_hint="--weights")
    if plot is not None:
        _suffix(plot, (".png",), "--plot")
    cfg = _run_config(run)
    user_cvs = cfg.get("cvs") if cfg["system"] == USER_SYSTEM else None
    if plot is not None and cfg["system"] != "aldp" and len(user_cvs or ()) != 2:
        msg = f"draws the FES over two torsions (aldp, or a user's 2 --cv); {run} holds a {cfg['system']} run"
        raise typer.BadParameter(msg + (f" with {len(user_cvs)} CV" if user_cvs else ""), param_hint="--plot")
    method = method or cfg.get("method")
    if method is None:
        raise typer.BadParameter(f"{run / 'config.json'} names no method; pass one", param_hint="--method")
    if method == "metad":  # biased trajectory: Delta F from the FES, not from raw samples
        fes = _run_tensors(run / "fes.pt", {"fes": ("G", "G")})["fes"].numpy()
        report = {"method": method, "system": "aldp", "energy_evals": cfg["energy_evals"]}
        report.update({f"{k}_kjmol": v for k, v in basin_df_from_fes(fes, cfg["kT"]).items()})
        if plot is not None:
            report["plot"] = str(plot_fes(plot, {"WTMetaD (OpenMM)": fes}, cfg["kT"]).path)
        typer.echo(json_text(report))
        return
    data = _samples(run, cfg["system"], user_cvs)
    s = data["cvs"].double()
    weights, w = _sample_weights(data, cfg, method, weights)
    report = {"method": method, "system": cfg["system"], "energy_evals": cfg["energy_evals"], "weights": weights}
    if w is not None:
        report["ess_frac"] = float(1 / (w**2).sum()) / len(w)
    if plot is not None:  # two torsions (checked above): aldp's (phi, psi) or a user's two CVs
        panel = {f"{method} ({weights} weights)": fes_from_samples(s, w, cfg["kT"])}
        labels = tuple(user_cvs) if user_cvs else ("phi", "psi")
        report["plot"] = str(plot_fes(plot, panel, cfg["kT"], labels=labels).path)
    if user_cvs:  # no reference to compare with: the CVs, the ESS and the FES over two of them
        report["cvs"] = user_cvs
    elif cfg["system"] == "aldp":
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
    typer.echo(json_text(report))


def _topology(cfg: dict, data_root: str | None):
    """The OpenMM topology of a run's molecular system (alanine dipeptide's from its prmtop under --data-root, a
    user's from its positions' .pdb or its .prmtop), None for a toy."""
    from flowlab.molecular.wt_asbs.dihedrals import molecule_topology
    from flowlab.molecular.wt_asbs.potentials import read_prmtop
    from flowlab.molecular.wt_asbs.sn2 import NUMBERS
    from flowlab.molecular.wt_asbs.trajectories import element_topology

    system = cfg["system"]
    if system == USER_SYSTEM:
        try:
            return molecule_topology(cfg["system_file"], cfg["positions_file"])
        except (FileNotFoundError, ValueError) as err:
            raise typer.BadParameter(f"the run's topology: {err}", param_hint="RUN") from err
    if system == "aldp":
        return read_prmtop(_aldp_data(data_root)[0]).topology
    return element_topology(NUMBERS, "SN2") if system == "sn2" else None


@app.command()
def export(
    run: Annotated[Path, typer.Argument(help="a run folder written by `sample` or `metad`")],
    out: Annotated[Path, typer.Option(help="the trajectory: .pdb (multi-model) | .dcd (molecules) | .xyz")],
    data_root: Annotated[
        str | None, typer.Option(help="alanine dipeptide's topology; defaults to $FLOWLAB_DATA")
    ] = None,
) -> None:
    """Write a run's samples (metad: its recorded positions) as a trajectory, one frame per sample, the writer
    chosen by --out's extension: PDB and DCD through OpenMM on the system's topology, XYZ with element symbols (a
    toy's coordinates as pseudo-atoms X)."""
    from flowlab.molecular.wt_asbs.toys import make_toy
    from flowlab.molecular.wt_asbs.trajectories import write_trajectory

    _suffix(out, TRAJECTORY_SUFFIXES, "--out")
    cfg = _run_config(run)
    if cfg["system"] in TOYS and out.suffix != ".xyz":
        msg = f"a toy's samples are points, not atoms: expected a .xyz file, got {out.name!r}"
        raise typer.BadParameter(msg, param_hint="--out")
    topology = _topology(cfg, data_root)
    dim = make_toy(cfg["system"]).dim if topology is None else 3 * topology.getNumAtoms()
    x = _run_tensors(run / "samples.pt", {"x": ("N", dim)})["x"]
    path = write_trajectory(x, out, topology=topology)
    typer.echo(f"wrote {path}: {len(x)} frames of {math.ceil(dim / 3)} atoms")
