"""`flowlab manifold train|sample|evaluate`: Generalised Flow Maps (and the RFM baseline) on S², T^d and the
Poincaré disk.

Data specs: `earth:volcano|earthquake|flood` (from $FLOWLAB_DATA or --data-root), `latlon:PATH` (a CSV of
latitude, longitude in degrees on S², like the earth files and `sample --coords latlon`), `torus:D` (the generated
wrapped-normal mixture on T^D, 4 components, scale 0.3, 20k/5k points), `hyperbolic` (the 6-component Poincaré disk
mixture), `angles:PATH` (an angle table on T^d, one column per angle: comma separated, tab separated as .tsv; in
radians, or degrees with `train --angle-unit degrees`; values outside the unit's range are refused). Earth, lat/lon
and angle tables are split 80/10/10 with --seed. A run folder holds model.pt (the EMA weights, tensors only),
config.json and fit's checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, SEEDS, choice_option, json_text, positive_ints_option

if TYPE_CHECKING:
    import torch

    from flowlab.core.manifolds.base import Manifold

#: what `sample --coords` writes: the manifold's ambient coordinates, or latitude/longitude degrees (S² only)
COORDS = ("ambient", "latlon")
#: the units of an angles:PATH table (`train --angle-unit`)
ANGLE_UNITS = ("radians", "degrees")
#: the data specs `train --data` takes
DATA_SPECS = "earth:volcano|earthquake|flood, latlon:PATH, torus:D, hyperbolic or angles:PATH"

app = typer.Typer(help="Generalised Flow Maps: few-step generation on manifolds (S², T^d, Poincaré disk).")


@dataclass(frozen=True)
class Dataset:
    """manifold, train and test points, and the exact density where the data are generated (else None)."""

    manifold: Manifold
    train: torch.Tensor
    test: torch.Tensor
    density: Any = None


def load_dataset(spec: str, *, seed: int, data_root: str | None = None, angle_unit: str = "radians") -> Dataset:
    """Resolve a data spec (see the module docstring) with the split / generator seeded by `seed`; `angle_unit`
    (radians | degrees) is the unit of an `angles:PATH` table."""
    import torch

    from flowlab.core.gfm.data import EARTH_SETS, load_angles, load_earth, poincare_mixture, random_torus_mixture, split
    from flowlab.core.manifolds import FlatTorus, PoincareBall, Sphere

    if angle_unit not in ANGLE_UNITS:
        raise ValueError(f"angle_unit: expected one of {ANGLE_UNITS}, got {angle_unit!r}")
    kind, _, arg = spec.partition(":")
    if angle_unit != "radians" and kind != "angles":
        raise ValueError(f"data: --angle-unit {angle_unit} is for an angles:PATH table, got {spec!r}")
    if kind == "earth":
        if arg not in EARTH_SETS:
            raise ValueError(f"data: expected earth:{'|'.join(EARTH_SETS)}, got {spec!r}")
        parts = split(load_earth(arg, data_root), seed)
        return Dataset(Sphere(2), parts.train, parts.test)
    if kind == "torus":
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError(f"data: expected torus:D with a positive dimension D, got {spec!r}")
        g = torch.Generator().manual_seed(seed)
        mix = random_torus_mixture(int(arg), components=4, scale=0.3, generator=g)
        return Dataset(
            FlatTorus(int(arg)), mix.sample(20_000, generator=g).float(), mix.sample(5000, generator=g).float(), mix
        )
    if kind == "hyperbolic" and not arg:
        g = torch.Generator().manual_seed(seed)
        mix = poincare_mixture()
        return Dataset(
            PoincareBall(2), mix.sample(20_000, generator=g).float(), mix.sample(5000, generator=g).float(), mix
        )
    if kind == "latlon" and arg:
        parts = split(load_earth(arg), seed)
        return Dataset(Sphere(2), parts.train, parts.test)
    if kind == "angles" and arg:
        x = load_angles(arg, degrees=angle_unit == "degrees")
        parts = split(x, seed)
        return Dataset(FlatTorus(x.shape[1]), parts.train, parts.test)
    raise ValueError(f"data: expected {DATA_SPECS}, got {spec!r}")


def _dataset_option(spec: str, *, seed: int, data_root: str | None, angle_unit: str) -> Dataset:
    """`load_dataset` for `train`: a bad spec or data file reported against --data, an earth file against
    --data-root."""
    try:
        return load_dataset(spec, seed=seed, data_root=data_root, angle_unit=angle_unit)
    except (FileNotFoundError, ValueError) as err:
        spec_error = str(err).startswith("data: ")
        option = "--data-root" if spec.startswith("earth:") and not spec_error else "--data"
        raise typer.BadParameter(str(err).removeprefix("data: "), param_hint=option) from err


def _run_fail(problem: str) -> typer.BadParameter:
    return typer.BadParameter(f"{problem} (train one with `flowlab manifold train`)", param_hint="--run")


def _run_meta(path: Path) -> dict[str, Any]:
    """A run's config.json with its keys checked: data (a spec), seed (an int), config (GFMConfig's fields) and
    data_root (a folder or null)."""
    try:
        meta = json.loads(path.read_text())
    except ValueError as err:  # not JSON, or not text at all
        raise _run_fail(f"{path} is not valid JSON ({err})") from err
    if not isinstance(meta, dict):
        raise _run_fail(f"{path}: expected a JSON object, got {type(meta).__name__}")
    for key, kind in (("data", str), ("seed", int), ("config", dict), ("data_root", str | None)):
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            raise _run_fail(f"{path}: {key}: expected {kind.__name__ if isinstance(kind, type) else kind}, got "
                            f"{meta.get(key)!r}")  # fmt: skip
    return meta


def _anchor_of(meta: dict[str, Any], run: Path) -> Any:
    """The teacher field an anchored run was trained on: the diagonal of the run its config.json names (the map
    needs it at every call, so that run must still be where it was)."""
    teacher = meta.get("teacher")
    if not isinstance(teacher, str) or not Path(teacher).is_dir():
        raise _run_fail(f"{run} is anchored on the teacher run {teacher!r}, which is not a folder here")
    return _load_run(Path(teacher))[0].requires_grad_(False).diagonal_field


def _load_run(run: Path) -> tuple[Any, dict[str, Any], Dataset]:
    """The flow map (its weights loaded, in eval mode), config.json and data of a run folder written by `train`
    (with its teacher run's map inside, for an anchored run); every problem with them is reported against --run."""
    import torch

    from flowlab.core.cli import load_weights_option
    from flowlab.core.gfm.train import GFMConfig, flow_map_for

    cfg_path, weights = run / "config.json", run / "model.pt"
    if not cfg_path.is_file() or not weights.is_file():
        raise _run_fail(f"{run} holds no config.json/model.pt")
    meta = _run_meta(cfg_path)
    try:
        config = GFMConfig.from_mapping(meta["config"])
        unit = meta.get("angle_unit", "radians")  # runs from before the option read radians
        data = load_dataset(meta["data"], seed=meta["seed"], data_root=meta["data_root"], angle_unit=unit)
    except (FileNotFoundError, ValueError) as err:
        raise _run_fail(f"{cfg_path}: {err}") from err
    state = load_weights_option(weights, "--run")
    fm = flow_map_for(data.manifold, config, teacher=_anchor_of(meta, run) if config.distill == "anchored" else None)
    try:
        fm.load_state_dict(state)
    except (RuntimeError, TypeError) as err:  # another architecture's weights, or not a state dict
        detail = " ".join(str(err).split())[:300]
        raise _run_fail(f"{weights}: not the weights of the model config.json describes: {detail}") from err
    if not all(bool(torch.isfinite(t).all()) for t in state.values()):
        raise _run_fail(f"{weights}: holds NaN or inf weights")
    fm.eval()
    return fm, meta, data


@app.command()
def train(
    data: Annotated[str, typer.Option(help=f"{DATA_SPECS}.")],
    out: Annotated[Path, typer.Option(help="Run folder to write.")],
    objective: Annotated[str, typer.Option(help="lsd | esd | psd | mf | rfm (the baseline).")] = "lsd",
    steps: Annotated[int, typer.Option(help="Optimiser steps.")] = 20_000,
    batch_size: Annotated[int, typer.Option(help="Batch size.")] = 512,
    hidden: Annotated[str, typer.Option(help="MLP widths, comma separated.")] = "256,256,256,256",
    lr: Annotated[float, typer.Option(help="Peak learning rate (cosine decay to 1e-5).")] = 1e-3,
    fourier_dim: Annotated[int, typer.Option(help="Random Fourier features of x (0: none; earth bench: 128).")] = 0,
    fourier_scale: Annotated[float, typer.Option(help="Their frequency scale (earth bench: 3).")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of the split / generated data and of training.", **SEEDS)] = 0,
    teacher: Annotated[
        Path | None,
        typer.Option(
            help="A run folder (e.g. an RFM run on the same manifold) to distil from: its v_{t,t} is the target of the "
            "diagonal and of the self-distillation (lsd, esd)."
        ),
    ] = None,
    warm_start: Annotated[
        bool,
        typer.Option(
            help="Start from the --teacher run's weights (it must have the same architecture); with --anchored, "
            "the correction starts from its features with a zero output layer (the map starts as its Euler step)."
        ),
    ] = False,
    source_fraction: Annotated[
        float,
        typer.Option(
            help="Share of the self-distillation pairs that start at s = 0, where the one-step sampler starts "
            "(core.gfm.torus7: 0.5 with --anchored)."
        ),
    ] = 0.0,
    lsd_derivative: Annotated[
        str,
        typer.Option(
            help="How G-LSD takes the map's time derivative: jvp (exact, forward mode) | fd (central difference) | "
            "fd_forward (forward difference, two maps a row; core.gfm.torus7)."
        ),
    ] = "jvp",
    anchored: Annotated[
        bool,
        typer.Option(
            help="With --teacher: the map is the teacher's Euler step plus a learned correction, "
            "X = exp_x((t-s)(v_T(x,s) + (t-s) g)), so its many-step sampler and likelihood are the teacher's; "
            "the teacher run must stay where it is."
        ),
    ] = False,
    angle_unit: Annotated[
        str, typer.Option(help="Unit of an angles:PATH table: radians | degrees (values outside it are refused).")
    ] = "radians",
    data_root: Annotated[
        str | None, typer.Option(envvar="FLOWLAB_DATA", help="Data root holding earth_sphere/ (default $FLOWLAB_DATA).")
    ] = None,
    device: Annotated[str, typer.Option(help="Torch device.")] = "cpu",
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train a GFM (or the RFM baseline) and write model.pt + config.json into OUT. With --teacher the GFM distils
    from a trained run instead of from its own diagonal; `core.gfm.torus7`'s recipe is an RFM run as --teacher with
    --anchored --warm-start --source-fraction 0.5 --lsd-derivative fd_forward and the teacher's architecture. The
    same run again needs --resume (OUT holds a checkpoint only at the end: a finished run is reloaded, a cut-short
    one trains again) or --overwrite; a different run there is refused unless --overwrite."""
    import torch

    from flowlab.core.cli import claim_run_option, device_option, option_error
    from flowlab.core.gfm.train import GFMConfig, train_gfm
    from flowlab.core.train.run_folder import data_fingerprint

    resolved = device_option(device)
    widths = positive_ints_option(hidden, "--hidden")
    try:
        config = GFMConfig(
            objective=objective, steps=steps, batch_size=batch_size, hidden=widths, lr=lr,
            fourier_dim=fourier_dim, fourier_scale=fourier_scale, source_fraction=source_fraction,
            lsd_derivative=lsd_derivative, distill="self" if teacher is None else "anchored" if anchored else "teacher",
        )  # fmt: skip
    except ValueError as err:
        raise option_error(err, {"distill": "--anchored" if anchored else "--teacher"}) from err
    if warm_start and teacher is None:
        raise typer.BadParameter("starts from a --teacher run's weights; give --teacher", param_hint="--warm-start")
    if anchored and teacher is None:
        raise typer.BadParameter("anchors the map on a --teacher run; give --teacher", param_hint="--anchored")
    choice_option(angle_unit, ANGLE_UNITS, "--angle-unit")
    ds = _dataset_option(data, seed=seed, data_root=data_root, angle_unit=angle_unit)
    teacher_map, init = _teacher_option(teacher, ds.manifold, config, warm_start) if teacher else (None, None)
    spec = {"command": "manifold train", "data": data, "seed": seed, "config": config.to_dict(),
            "angle_unit": angle_unit, "data_fingerprint": data_fingerprint(ds.train),
            "teacher": None if teacher is None else str(teacher.resolve()), "warm_start": warm_start}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    trained = train_gfm(
        ds.manifold, ds.train, config, generator=torch.Generator().manual_seed(seed), device=resolved,
        ckpt_dir=out / "checkpoints", progress=progress, init=init,
        teacher=None if teacher_map is None else teacher_map.to(resolved).requires_grad_(False).diagonal_field,
    )  # fmt: skip
    torch.save(trained.flow_map.state_dict(), out / "model.pt")
    meta = {"data": data, "seed": seed, "data_root": data_root, "angle_unit": angle_unit, "manifold": repr(ds.manifold)}
    meta.update(teacher=spec["teacher"], warm_start=warm_start)
    meta.update(config=config.to_dict(), samples_seen=trained.samples_seen)
    (out / "config.json").write_text(json.dumps(meta, indent=2))
    typer.echo(f"trained {objective} on {data}: {trained.samples_seen} samples seen -> {out}")


def _teacher_option(run: Path, manifold: Manifold, config: Any, warm_start: bool) -> tuple[Any, Any]:
    """(the flow map of the --teacher run, its weights when `warm_start` else None: for an anchored `config`, its
    features with a zero output layer); a run on another manifold, or weights that do not fit `config`'s architecture
    for --warm-start, reported against the option."""
    from flowlab.core.gfm.train import flow_map_for, zero_head

    try:
        fm, _, teacher_data = _load_run(run)
    except typer.BadParameter as err:
        raise typer.BadParameter(err.message, param_hint="--teacher") from err
    if repr(teacher_data.manifold) != repr(manifold):
        problem = f"{run} was trained on {teacher_data.manifold!r}, this run's data lie on {manifold!r}"
        raise typer.BadParameter(problem, param_hint="--teacher")
    if not warm_start:
        return fm, None
    anchored = config.distill == "anchored"
    state = zero_head(fm.state_dict()) if anchored else fm.state_dict()
    try:
        flow_map_for(manifold, config, teacher=fm.diagonal_field if anchored else None).load_state_dict(state)
    except RuntimeError as err:
        detail = " ".join(str(err).split())[:200]
        problem = f"the --teacher run's weights do not fit this run's architecture (--hidden, --fourier-dim): {detail}"
        raise typer.BadParameter(problem, param_hint="--warm-start") from err
    return fm, state


def _suffix(path: Path, suffixes: tuple[str, ...], option: str) -> None:
    """Refuse a file whose extension (which decides the writer) is not one of `suffixes`."""
    if path.suffix not in suffixes:
        raise typer.BadParameter(f"expected a {' or '.join(suffixes)} file, got {path.name!r}", param_hint=option)


def _check_sample_outputs(manifold: Manifold, coords: str, plot: Path | None) -> None:
    """Refuse, before sampling, lat/lon coordinates off S² and a plot of a manifold without a chart."""
    from flowlab.core.gfm.plot import chart
    from flowlab.core.manifolds import Sphere

    if coords == "latlon" and not (isinstance(manifold, Sphere) and manifold.dim == 2):
        problem = f"latlon needs a run on the 2-sphere, this one is on {manifold!r}"
        raise typer.BadParameter(problem, param_hint="--coords")
    if plot is not None:
        try:
            chart(manifold)
        except ValueError as err:
            raise typer.BadParameter(str(err).removeprefix("manifold: "), param_hint="--plot") from err


def _write_samples(x: torch.Tensor, out: Path, coords: str) -> None:
    """Samples (N, ambient_dim) to `out` (.pt: a tensor; .csv: a header-less table), as lat/lon degrees (N, 2) when
    coords is latlon."""
    import torch

    from flowlab.core.gfm.data import save_table, sphere_to_latlon

    table = sphere_to_latlon(x) if coords == "latlon" else x
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        save_table(out, table)
    else:
        torch.save(table, out)


@app.command("sample")
def sample_cmd(
    run: Annotated[Path, typer.Option(help="Run folder written by `train`.")],
    out: Annotated[Path, typer.Option(help="Output .pt (tensor) or .csv file.")],
    n: Annotated[int, typer.Option(min=1, help="Number of samples.")] = 1000,
    nfe: Annotated[int, typer.Option(min=1, help="Network evaluations (flow-map jumps or Euler steps).")] = 1,
    sampler: Annotated[str, typer.Option(help="jump (flow map) | euler (v_{t,t}, the RFM sampler).")] = "jump",
    coords: Annotated[
        str, typer.Option(help="ambient (S²: unit vectors, T^d: angles) | latlon (S²: latitude, longitude degrees).")
    ] = "ambient",
    plot: Annotated[Path | None, typer.Option(help="Also draw the sample density over the data here (.png).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the source draws.", **SEEDS)] = 0,
    device: Annotated[str, typer.Option(help="Torch device.")] = "cpu",
) -> None:
    """Draw N samples with NFE steps and write them in --coords; --plot draws their density (S²: longitude/latitude,
    T^d: the first two angles, the disk: its plane) over the run's training data."""
    import torch

    from flowlab.core.cli import device_option
    from flowlab.core.gfm.evaluate import manifold_error
    from flowlab.core.gfm.plot import plot_density
    from flowlab.core.gfm.sample import SAMPLERS, sample

    _suffix(out, (".pt", ".csv"), "--out")
    choice_option(coords, COORDS, "--coords")
    if plot is not None:
        _suffix(plot, (".png",), "--plot")
    choice_option(sampler, SAMPLERS, "--sampler")
    resolved = device_option(device)
    fm, _, ds = _load_run(run)
    _check_sample_outputs(ds.manifold, coords, plot)
    x = sample(
        fm.to(resolved), n, manifold=ds.manifold, nfe=nfe, sampler=sampler,
        generator=torch.Generator().manual_seed(seed), device=resolved,
    ).cpu()  # fmt: skip
    _write_samples(x, out, coords)
    if plot is not None:
        plot_density(x, ds.train, manifold=ds.manifold, path=plot)
    drawn = f" and {plot}" if plot is not None else ""
    typer.echo(f"{n} samples at {nfe} NFE -> {out}{drawn} (manifold error {manifold_error(x, ds.manifold):.3g})")


@app.command()
def evaluate(
    run: Annotated[Path, typer.Option(help="Run folder written by `train`.")],
    nfe: Annotated[str, typer.Option(help="NFEs for the MMD, comma separated.")] = "1,2,4,8,100",
    sampler: Annotated[str, typer.Option(help="jump | euler.")] = "jump",
    n: Annotated[int, typer.Option(min=1, help="Samples per NFE.")] = 2000,
    nll: Annotated[bool, typer.Option(help="Also compute the test NLL from v_{t,t}.")] = True,
    nll_steps: Annotated[int, typer.Option(min=1, help="RK4 steps of the likelihood ODE.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the source draws.", **SEEDS)] = 0,
    out: Annotated[Path | None, typer.Option(help="Write the metrics as JSON here too.")] = None,
) -> None:
    """Geodesic-kernel MMD to the test split at each NFE (the signed root of the unbiased MMD², negative as often as
    not for a perfect sampler) beside its noise floor `mmd_split_floor` (halves of the test split against each
    other), test NLL (and KL for generated data); prints JSON."""
    import torch

    from flowlab.core.gfm.evaluate import MAX_REFERENCE, evaluate_nll, mmd_by_nfe, mmd_split_floor, reference_bandwidth
    from flowlab.core.gfm.sample import SAMPLERS

    nfes = positive_ints_option(nfe, "--nfe")
    choice_option(sampler, SAMPLERS, "--sampler")
    fm, meta, ds = _load_run(run)
    reference = ds.test[:MAX_REFERENCE]
    h = reference_bandwidth(reference, manifold=ds.manifold)
    mmds = mmd_by_nfe(
        fm, reference, manifold=ds.manifold, nfes=nfes, sampler=sampler, n=n, bandwidth=h,
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip
    result: dict[str, Any] = {"data": meta["data"], "bandwidth": h, **{f"mmd_nfe{k}": v for k, v in mmds.items()}}
    result["mmd_split_floor"] = mmd_split_floor(reference, manifold=ds.manifold, bandwidth=h, seed=seed)
    if nll:
        value = float(evaluate_nll(fm, ds.test, manifold=ds.manifold, steps=nll_steps).mean())
        result["nll"] = value
        if ds.density is not None:
            result["kl"] = float(ds.density.log_prob(ds.test.double()).mean()) + value
    text = json_text(result)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    typer.echo(text)
