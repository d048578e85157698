"""EnvSocial-Diff's commands `train|simulate|predict|evaluate|render|export` (mounted as `flowlab crowd ...`) on the
shared crowd scenes (UCY students03, GC).

Data come from `--data` or $FLOWLAB_DATA (the folder holding `crowds/`). Rollouts written by `simulate` and `predict`
are torch files of tensors (`positions (R, T, P, 2)` over the window's frames start..start+T-1, `mask (T, P)`,
`start`, `window`, `scene`), read back with weights_only=True; `export` writes one replica as the "frame ped_id x y"
text of trajectory forecasting. Every option, model and rollout is checked before a scene is read, and the scene
before any work.
"""

from __future__ import annotations

from pathlib import Path

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, SEEDS, choice_option, json_text
from flowlab.crowd_sim.envsocial_diff.names import ABLATIONS, GOALS, SAMPLERS
from flowlab.crowd_sim.names import FRAMES, SCENES

app = typer.Typer(help="EnvSocial-Diff crowd simulation: train, simulate, predict, evaluate, render, export.")

BASELINES = ("sfm", "cv")
PROTOCOLS = ("window", "forecast")
ROLLOUT_HELP = "a file written by `flowlab crowd simulate` or `flowlab crowd predict`"
TRACKS_HELP = 'your own trajectory file ("frame ped_id x y" lines, or the package CSV + JSON); repeat for more'
FPS_HELP = "frames per second of --tracks (ETH/UCY files: 2.5); with --scene, resample its windows to this rate"
ANNOTATIONS_HELP = "a JSON scene file for --tracks: obstacles, interests, boundary, homography, image, constants"
GOAL_HELP = (
    "recorded (walk to each track's last point) | constant_velocity (goals 8 s ahead of the last observed velocity: "
    "what forecasting without known destinations gives, so train with it to forecast)"
)


def _window_name(scene: str, name: str) -> str:
    """The window a split name (its first window) or a window name of `scene` stands for (SPLITS; no data read)."""
    from flowlab.crowd_sim.data import SPLITS

    window = SPLITS[scene].get(name, (name,))[0]
    known = sorted({w for names in SPLITS[scene].values() for w in names})
    if window not in known:
        raise typer.BadParameter(f"unknown window {name!r}; expected one of {', '.join([*SPLITS[scene], *known])}",
                                 param_hint="--window")  # fmt: skip
    return window


def _scene(name: str, data: Path | None, frame: str, windows="all"):
    """Scene `name` (checked before) with its `windows` from the data root; any problem is reported against --data."""
    from flowlab.crowd_sim.data import load_scene

    try:
        return load_scene(name, data, windows=windows, frame=frame)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="--data") from err


def _source(scene_name: str, tracks, fps: float | None, annotations: Path | None, data: Path | None, frame: str):
    """The scene of the options: the user's --tracks at --fps with --annotations, or the shipped --scene (its windows
    resampled to --fps when given)."""
    from dataclasses import replace

    from flowlab.crowd_sim.data import Scene
    from flowlab.crowd_sim.envsocial_diff.forecast import resample

    if tracks:
        try:
            return Scene.from_tracks(tracks, fps=fps, annotations=annotations)
        except (FileNotFoundError, ValueError) as err:
            raise typer.BadParameter(str(err), param_hint="--tracks") from err
    if annotations is not None:
        raise typer.BadParameter("--annotations goes with --tracks (the shipped scenes have theirs)",
                                 param_hint="--annotations")  # fmt: skip
    if fps is not None and not fps > 0:
        raise typer.BadParameter(f"expected a positive frame rate, got {fps}", param_hint="--fps")
    scene = _scene(scene_name, data, frame)
    if fps is None:
        return scene
    try:
        windows = {k: resample(w, 1.0 / fps) for k, w in scene.windows.items()}
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--fps") from err
    return replace(scene, time_unit=1.0 / fps, windows=windows)


def _validation(scene, config, device):
    """The score `train_best_of` ranks initialisations by: forecast minADE20 on the validation windows for a model
    with constant-velocity goals, else the whole-window MAE of the scene's validation window."""
    import torch

    from flowlab.crowd_sim.data import SPLITS
    from flowlab.crowd_sim.envsocial_diff.forecast import evaluate_forecast, forecast_sequences
    from flowlab.crowd_sim.envsocial_diff.train import validation_mae

    windows = (
        [scene.windows[n] for n in SPLITS[scene.name]["val"]] if scene.name in SPLITS else [*scene.windows.values()]
    )
    if config.goal == "recorded":
        return lambda model, seed: validation_mae(model, scene, windows[0], seed=seed)
    sequences = forecast_sequences(windows)

    def score(model, seed: int) -> float:
        policy = model.policy(scene, sampler="ddim", sample_steps=10)
        gen = torch.Generator(device).manual_seed(seed)
        return evaluate_forecast(scene, sequences, policy, k=20, generator=gen, device=device)["min_ade"]

    return score


def _model(checkpoint: Path, device, sampler: str, sample_steps: int | None):
    """The model of --checkpoint, checked to sample with --sampler and --sample-steps."""
    from flowlab.core.cli import option_error
    from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff

    try:
        model = EnvSocialDiff.load(checkpoint, device=device)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="--checkpoint") from err
    try:
        model.grid(sampler, sample_steps)
    except ValueError as err:
        raise option_error(err) from err
    return model


def _policy(scene, model, baseline: str | None, sampler: str, sample_steps: int | None):
    from flowlab.crowd_sim.envsocial_diff.baselines import SocialForcePolicy, constant_velocity
    from flowlab.crowd_sim.physics import DestinationForce, SocialForceParams

    if baseline == "cv":
        return constant_velocity
    if baseline == "sfm":
        return SocialForcePolicy(scene, SocialForceParams(), DestinationForce())
    return model.policy(scene, sampler=sampler, sample_steps=sample_steps)


def _policy_options(scene_name, frame, sampler, checkpoint, baseline, sample_steps, device):
    """(model or None, device) of the options every forecasting command shares, all checked before any data is
    read: the scene, frame and sampler names, exactly one of --checkpoint and --baseline, the device."""
    from flowlab.core.cli import device_option

    choice_option(scene_name, SCENES, "--scene", "scene")
    choice_option(frame, FRAMES, "--frame", "frame")
    choice_option(sampler, SAMPLERS, "--sampler", "sampler")
    if (checkpoint is None) == (baseline is None):
        raise typer.BadParameter("give exactly one of --checkpoint and --baseline", param_hint="--checkpoint")
    if baseline is not None:
        choice_option(baseline, BASELINES, "--baseline", "baseline")
    device = device_option(device)
    return (None if checkpoint is None else _model(checkpoint, device, sampler, sample_steps)), device


def _rollout_setup(
    scene_name: str,
    checkpoint: Path | None,
    baseline: str | None,
    window: str,
    sampler: str,
    sample_steps: int | None,
    data: Path | None,
    frame: str,
    device: str,
):
    """(scene, recorded window, policy, device) of the options `simulate` and `predict` share: every option and the
    model checked first, then the scene read with the one window."""
    model, device = _policy_options(scene_name, frame, sampler, checkpoint, baseline, sample_steps, device)
    name = _window_name(scene_name, window)
    scene = _scene(scene_name, data, frame, windows=[name])
    return scene, scene.windows[name], _policy(scene, model, baseline, sampler, sample_steps), device


def _save_rollout(traj, scene, window, out: Path) -> None:
    """Write `traj` (a `Trajectories` over frames of `window`) as the rollout file `evaluate`, `render` and `export`
    read, and say what it holds."""
    import torch

    replicas, steps = traj.positions.shape[:2]
    out.parent.mkdir(parents=True, exist_ok=True)
    blob = {"positions": traj.positions.cpu(), "mask": traj.mask.cpu(), "start": traj.start, "window": window.name}
    torch.save({**blob, "scene": scene.name}, out)
    typer.echo(
        f"{window.name}: {steps - 1} frames after frame {traj.start}, {replicas} replica(s) in {traj.seconds:.1f} s "
        f"({traj.agent_steps_per_second:.0f} pedestrian-steps/s); collisions {traj.collisions.tolist()}; wrote {out}"
    )


@app.command("train")
def train_cmd(
    scene_name: str = typer.Option("ucy_students03", "--scene", help=f"one of {', '.join(SCENES)}"),
    tracks: list[Path] | None = typer.Option(None, "--tracks", help=TRACKS_HELP),
    fps: float | None = typer.Option(None, "--fps", help=FPS_HELP),
    annotations: Path | None = typer.Option(None, "--annotations", help=ANNOTATIONS_HELP),
    val_tracks: list[Path] | None = typer.Option(
        None, "--val-tracks", help="validation files for --inits > 1 with --tracks (same --fps and --annotations)"
    ),
    goal: str = typer.Option("recorded", "--goal", help=GOAL_HELP),
    ablation: str = typer.Option("full", "--ablation", help=f"one of {', '.join(ABLATIONS)}"),
    size: str = typer.Option("quick", "--size", help="network size and diffusion steps: quick | full"),
    epochs: int = typer.Option(10, "--epochs", help="teacher-forced epochs over the training windows"),
    finetune_steps: int = typer.Option(0, "--finetune-steps", help="multi-frame rollout fine-tuning steps"),
    frame_stride: int = typer.Option(1, "--frame-stride", min=1, help="train on every n-th recorded frame"),
    inits: int = typer.Option(
        1, "--inits", help="train this many initialisations and keep the best rollout of the validation window"
    ),
    out: Path = typer.Option(Path("envsocial.pt"), "--out", help="model file to write"),
    ckpt_dir: Path | None = typer.Option(None, "--ckpt-dir", help="training checkpoints, resumed (--inits 1 only)"),
    data: Path | None = typer.Option(None, "--data", help="data root holding crowds/ (default $FLOWLAB_DATA)"),
    frame: str = typer.Option("published", "--frame", help="UCY coordinate frame: published | corrected"),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Train EnvSocial-Diff (or an ablation) on a scene's training windows, or on your own --tracks, and save it.
    --resume continues the run in --ckpt-dir with the same options; a different one there is refused unless
    --overwrite."""
    import dataclasses

    import torch

    from flowlab.core.cli import claim_run_option, device_option, option_error
    from flowlab.core.nets import seeded_init
    from flowlab.core.train import data_fingerprint
    from flowlab.crowd_sim.data import SPLITS
    from flowlab.crowd_sim.envsocial_diff.model import SIZES
    from flowlab.crowd_sim.envsocial_diff.objective import training_frames
    from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config
    from flowlab.crowd_sim.envsocial_diff.train import TrainConfig, calibrate, train, train_best_of

    choice_option(scene_name, SCENES, "--scene", "scene")
    choice_option(ablation, tuple(ABLATIONS), "--ablation", "ablation")
    choice_option(size, tuple(SIZES), "--size", "size")
    choice_option(frame, FRAMES, "--frame", "frame")
    choice_option(goal, GOALS, "--goal", "goal model")
    if inits < 1 or (inits > 1 and ckpt_dir is not None):
        raise typer.BadParameter(f"expected --inits >= 1, and 1 with --ckpt-dir; got {inits}", param_hint="--inits")
    if inits > 1 and tracks and not val_tracks:
        raise typer.BadParameter(
            "--inits > 1 with --tracks needs --val-tracks to choose between them", param_hint="--inits"
        )
    device = device_option(device)
    try:
        train_config = TrainConfig(epochs=epochs, finetune_steps=finetune_steps)
    except ValueError as err:
        raise option_error(err) from err
    scene = _source(scene_name, tracks, fps, annotations, data, frame)
    windows = list(scene.windows.values()) if tracks else [scene.windows[n] for n in SPLITS[scene.name]["train"]]
    if ckpt_dir is not None:
        spec = {"command": "crowd train", "scene": scene.name, "ablation": ablation, "size": size, "frame": frame,
                "frame_stride": frame_stride, "train": train_config.to_dict(), "seed": seed, "goal": goal,
                "time_unit": scene.time_unit,
                "data_fingerprint": data_fingerprint(*(torch.as_tensor(w.positions) for w in windows))}  # fmt: skip
        claim_run_option(ckpt_dir, spec, overwrite=overwrite, resume=resume, option="--ckpt-dir")
    try:
        config = dataclasses.replace(scene_config(SIZES[size], ablation, scene), goal=goal)
        with seeded_init(seed):  # the initial weights and dropout come from --seed alone
            model = EnvSocialDiff(config, device=device)
            calibrate(model, windows)
            frames = training_frames(model, scene, windows, stride=frame_stride)
            if inits == 1:
                train(model, scene, windows, train_config, generator=torch.Generator(device).manual_seed(seed),
                      ckpt_dir=ckpt_dir, frames=frames)  # fmt: skip
            else:
                val_scene = _source(scene_name, val_tracks, fps, annotations, data, frame) if tracks else scene
                val = _validation(val_scene, config, device)
                model, scores = train_best_of(
                    lambda: EnvSocialDiff(config, device=device), scene, windows, None, train_config,
                    seeds=[seed * 1000 + j for j in range(inits)], frames=frames, validate=val,
                )  # fmt: skip
                typer.echo("validation score per initialisation: " + ", ".join(f"{v:.3f}" for v in scores))
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    typer.echo(f"saved {ablation} model to {model.save(out)} (residual scale {model.scale:.3f} m/s^2)")


@app.command("simulate")
def simulate_cmd(
    scene_name: str = typer.Option("ucy_students03", "--scene"),
    checkpoint: Path | None = typer.Option(None, "--checkpoint", help="a model written by `flowlab crowd train`"),
    baseline: str | None = typer.Option(None, "--baseline", help="sfm | cv instead of a model"),
    window: str = typer.Option("test", "--window", help="a split name or a window name (e.g. time162-216)"),
    steps: int | None = typer.Option(None, "--steps", min=1, help="frames to simulate (default: the whole window)"),
    replicas: int = typer.Option(1, "--replicas", min=1, help="independent samples, batched"),
    sampler: str = typer.Option("ddpm", "--sampler", help="ddpm | ddim"),
    sample_steps: int | None = typer.Option(None, "--sample-steps", min=1, help="DDIM steps"),
    out: Path = typer.Option(Path("rollout.pt"), "--out"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
) -> None:
    """Roll a whole recorded window forward from its entry states and destinations; write the trajectories."""
    import torch

    from flowlab.crowd_sim.simulate import simulate_window

    scene, w, policy, device = _rollout_setup(
        scene_name, checkpoint, baseline, window, sampler, sample_steps, data, frame, device
    )
    gen = torch.Generator(device).manual_seed(seed)
    traj = simulate_window(
        scene, w, policy, steps=steps, replicas=replicas, generator=gen, device=device, progress=True
    )  # fmt: skip
    _save_rollout(traj, scene, w, out)


@app.command("predict")
def predict_cmd(
    scene_name: str = typer.Option("ucy_students03", "--scene"),
    tracks: list[Path] | None = typer.Option(None, "--tracks", help=TRACKS_HELP + " (with --protocol forecast)"),
    fps: float | None = typer.Option(None, "--fps", help=FPS_HELP),
    annotations: Path | None = typer.Option(None, "--annotations", help=ANNOTATIONS_HELP),
    protocol: str = typer.Option(
        "window",
        "--protocol",
        help="window: who is seen up to --start in one --window | forecast: every 8 -> 12 sequence of the data "
        "(Social-GAN windowing; --observe, --horizon), all in one batched call",
    ),
    checkpoint: Path | None = typer.Option(None, "--checkpoint", help="a model written by `flowlab crowd train`"),
    baseline: str | None = typer.Option(None, "--baseline", help="sfm | cv instead of a model"),
    window: str = typer.Option("test", "--window", help="a split name or a window name (e.g. time162-216)"),
    start: int | None = typer.Option(
        None, "--start", min=0, help="the last observed frame of the window (default: the first with --observe before)"
    ),
    observe: int = typer.Option(8, "--observe", min=2, help="observed frames; who is present in all is predicted"),
    horizon: int = typer.Option(12, "--horizon", min=1, help="frames to predict after --start"),
    samples: int = typer.Option(20, "--samples", min=1, help="k sampled futures (the rollout's replicas), batched"),
    known_destinations: bool = typer.Option(
        False, "--known-destinations", help="walk to the recorded exits (default: the model's goal model)"
    ),
    sampler: str = typer.Option("ddpm", "--sampler", help="ddpm | ddim"),
    sample_steps: int | None = typer.Option(None, "--sample-steps", min=1, help="DDIM steps"),
    out: Path = typer.Option(Path("prediction.pt"), "--out"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
) -> None:
    """Forecast pedestrians: k sampled futures of --horizon frames, jointly, from the --observe frames before. With
    --protocol window, those observed up to --start of one --window, written as a rollout of the window (`evaluate`,
    `render` and `export` read it); with --protocol forecast, every sequence of --tracks (or of the --window), written
    as a forecast file that `evaluate --protocol forecast` scores."""
    import torch

    from flowlab.core.cli import option_error
    from flowlab.crowd_sim.envsocial_diff.predict import predict_window

    choice_option(protocol, PROTOCOLS, "--protocol", "protocol")
    if protocol == "forecast":
        _forecast_cmd(scene_name, tracks, fps, annotations, checkpoint, baseline, window, observe, horizon, samples,
                      sampler, sample_steps, out, data, frame, seed, device)  # fmt: skip
        return
    if tracks or fps is not None or annotations is not None:
        raise typer.BadParameter("--tracks, --fps and --annotations go with --protocol forecast", param_hint="--tracks")
    scene, w, policy, device = _rollout_setup(
        scene_name, checkpoint, baseline, window, sampler, sample_steps, data, frame, device
    )
    gen = torch.Generator(device).manual_seed(seed)
    try:
        traj = predict_window(scene, w, policy, samples, start=start, observe=observe, horizon=horizon,
                              known_destinations=known_destinations, generator=gen, device=device)  # fmt: skip
    except ValueError as err:
        raise option_error(err, {"k": "--samples", "destinations": "--known-destinations"}) from err
    _save_rollout(traj, scene, w, out)


def _forecast_cmd(scene_name, tracks, fps, annotations, checkpoint, baseline, window, observe, horizon, samples,
                  sampler, sample_steps, out, data, frame, seed, device) -> None:  # fmt: skip
    """`predict --protocol forecast`: every sequence of the data forecast in one batched call, saved."""
    import torch

    from flowlab.core.cli import option_error
    from flowlab.crowd_sim.envsocial_diff.forecast import forecast_sequences, forecast_to_blob, sample_forecast

    model, device = _policy_options(scene_name, frame, sampler, checkpoint, baseline, sample_steps, device)
    scene = _source(scene_name, tracks, fps if tracks or fps else 2.5, annotations, data, frame)
    windows = list(scene.windows.values()) if tracks else [scene.windows[_window_name(scene.name, window)]]
    try:
        sequences = forecast_sequences(windows, observe=observe, horizon=horizon)
        gen = torch.Generator(device).manual_seed(seed)
        policy = _policy(scene, model, baseline, sampler, sample_steps)
        pred = sample_forecast(scene, sequences, policy, k=samples, generator=gen, device=device)
    except ValueError as err:
        raise option_error(err, {"k": "--samples", "windows": "--tracks" if tracks else "--window"}) from err
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(forecast_to_blob(sequences, pred, scene.time_unit), out)
    typer.echo(f"{sequences.num_sequences} sequences, {len(sequences.groups)} pedestrians, {samples} samples of "
               f"{horizon} frames ({horizon * scene.time_unit:.1f} s); wrote {out}")  # fmt: skip


@app.command("evaluate")
def evaluate_cmd(
    rollout: Path = typer.Argument(..., help=ROLLOUT_HELP + ", or with --protocol forecast a forecast file"),
    protocol: str = typer.Option(
        "simulation", "--protocol", help="simulation (a rollout) | forecast (minADE/minFDE over the k samples)"
    ),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    out: Path | None = typer.Option(None, "--out", help="write the metrics as JSON"),
) -> None:
    """Simulation metrics (MAE, OT, MMD, DTW, FDE, collisions) of a rollout against the recorded window, where both
    have the pedestrian; with --protocol forecast, minADE / minFDE of a `predict --protocol forecast` file."""
    from flowlab.crowd_sim.metrics import simulation_metrics

    choice_option(protocol, ("simulation", "forecast"), "--protocol", "protocol")
    choice_option(frame, FRAMES, "--frame", "frame")
    if protocol == "forecast":
        _write_metrics(rollout, _score_forecast_file(rollout), out)
        return
    blob = _read_rollout(rollout)
    _, w, frames, mask = _recorded(rollout, blob, data, frame)
    rows = [simulation_metrics(p, w.positions[frames], mask) for p in blob["positions"]]
    for r, row in enumerate(rows):
        typer.echo(f"replica {r}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()))
    _write_metrics(rollout, {"replicas": rows}, out)


def _write_metrics(rollout: Path, metrics: dict, out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json_text({"rollout": str(rollout), **metrics}, indent=2))
        typer.echo(f"wrote {out}")


def _score_forecast_file(path: Path) -> dict:
    """minADE / minFDE of a forecast file (echoed), checked to be one."""
    from flowlab.core.cli import load_weights_option
    from flowlab.crowd_sim.envsocial_diff.forecast import forecast_problem, score_forecast, sequences_of

    blob = load_weights_option(path, "ROLLOUT", map_location="cpu")
    problem = forecast_problem(blob)
    if problem is not None:
        hint = " (a rollout: drop --protocol forecast)" if isinstance(blob, dict) and "mask" in blob else ""
        raise typer.BadParameter(f"{path}: not a file of `flowlab crowd predict --protocol forecast`: {problem}{hint}",
                                 param_hint="ROLLOUT")  # fmt: skip
    metrics = score_forecast(blob["pred"], sequences_of(blob))
    k = blob["pred"].shape[0]
    typer.echo(f"minADE{k} {metrics['min_ade']:.4f} m, minFDE{k} {metrics['min_fde']:.4f} m over "
               f"{int(metrics['pedestrians'])} pedestrians in {int(metrics['sequences'])} sequences")  # fmt: skip
    return {"k": k, **metrics}


@app.command("render")
def render_cmd(
    rollout: Path = typer.Argument(..., help=ROLLOUT_HELP),
    out: Path = typer.Option(Path("rollout.gif"), "--out", help="a .gif animation, or a folder of PNG frames"),
    every: int = typer.Option(5, "--every", min=1, help="draw every n-th frame"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
) -> None:
    """Draw a rollout over the scene's obstacles and objects of interest (recorded positions alongside)."""
    from flowlab.crowd_sim.render import render

    choice_option(frame, FRAMES, "--frame", "frame")
    if out.suffix.lower() != ".gif" and out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} is a file; expected a .gif or a folder for the frames", param_hint="--out")
    blob = _read_rollout(rollout)
    scene, w, frames, mask = _recorded(rollout, blob, data, frame)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = render(scene, blob["positions"][0], mask, out, real=w.positions[frames], every=every)
    typer.echo(f"wrote {path}")


@app.command("export")
def export_cmd(
    rollout: Path = typer.Argument(..., help=ROLLOUT_HELP),
    out: Path = typer.Option(Path("rollout.txt"), "--out", help='a .txt file of "frame ped_id x y" lines'),
    replica: int = typer.Option(0, "--replica", min=0, help="the replica (sample) to write"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
) -> None:
    """Write one replica of a rollout in the text format of trajectory forecasting (ETH/UCY): tab-separated
    "frame ped_id x y" lines, frames of the recorded window, the recording's pedestrian ids."""
    from flowlab.crowd_sim.data import write_pedestrian_txt

    choice_option(frame, FRAMES, "--frame", "frame")
    if out.suffix.lower() != ".txt" or out.is_dir():
        raise typer.BadParameter(f'expected a .txt file ("frame ped_id x y" lines), got {out}', param_hint="--out")
    blob = _read_rollout(rollout)
    if replica >= len(blob["positions"]):
        raise typer.BadParameter(f"{rollout} holds {len(blob['positions'])} replica(s); expected 0.."
                                 f"{len(blob['positions']) - 1}, got {replica}", param_hint="--replica")  # fmt: skip
    _, w, _, _ = _recorded(rollout, blob, data, frame)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = write_pedestrian_txt(_replica_window(blob, w, replica), out)
    typer.echo(f"wrote {path} ({int(blob['mask'].sum())} points of replica {replica})")


def _replica_window(blob: dict, window, replica: int):
    """Replica `replica` of a rollout over frames of `window` as a `Window` of its frames 0..start+T-1 (nobody
    present before start), with the recording's pedestrian ids, destinations and time unit."""
    import torch

    from flowlab.crowd_sim.data import Window

    positions, mask, start = blob["positions"][replica], blob["mask"], blob["start"]
    return Window(
        name=window.name,
        positions=torch.cat([positions.new_zeros(start, *positions.shape[1:]), positions]),
        mask=torch.cat([mask.new_zeros(start, mask.shape[1]), mask]),
        destinations=window.destinations,
        time_unit=window.time_unit,
        ped_ids=window.ped_ids,
    )


def _rollout_problem(blob: object) -> str | None:
    """What keeps `blob` from being a rollout written by `simulate` or `predict` (None: nothing)."""
    import torch

    from flowlab.crowd_sim.data import SPLITS

    if not isinstance(blob, dict) or not {"positions", "mask", "start", "window", "scene"} <= set(blob):
        return "expected positions, mask, start, window and scene"
    positions, mask, start = blob["positions"], blob["mask"], blob["start"]
    if blob["scene"] not in SCENES:
        return f"scene: unknown {blob['scene']!r}; expected one of {', '.join(SCENES)}"
    if blob["window"] not in {w for names in SPLITS[blob["scene"]].values() for w in names}:
        return f"window: {blob['window']!r} is not a window of {blob['scene']}"
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        return f"start: expected a frame index >= 0, got {start!r}"
    if not isinstance(positions, torch.Tensor) or positions.dim() != 4 or positions.shape[-1] != 2:
        return f"positions: expected a tensor (R, T, P, 2), got {getattr(positions, 'shape', type(positions))}"
    if min(positions.shape) == 0 or not positions.is_floating_point() or not bool(torch.isfinite(positions).all()):
        return "positions: expected at least one replica, frame and pedestrian, all finite floats"
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != positions.shape[1:3]:
        return f"mask: expected a bool tensor {tuple(positions.shape[1:3])} (T, P), got {getattr(mask, 'shape', mask)}"
    return None


def _read_rollout(path: Path) -> dict:
    from flowlab.core.cli import load_weights_option

    blob = load_weights_option(path, "ROLLOUT", map_location="cpu")
    problem = _rollout_problem(blob)
    if problem is not None:
        raise typer.BadParameter(f"{path}: not a rollout written by `flowlab crowd simulate` or `predict`: {problem}",
                                 param_hint="ROLLOUT")  # fmt: skip
    return blob


def _recorded(path: Path, blob: dict, data: Path | None, frame: str):
    """(scene, recorded window, frames, mask) a rollout covers, checked to lie inside the window; mask (T, P): where
    both the rollout and the recording have the pedestrian."""
    scene = _scene(blob["scene"], data, frame, windows=[blob["window"]])
    w = scene.windows[blob["window"]]
    _, steps, people, _ = blob["positions"].shape
    if blob["start"] + steps > w.num_frames or people != w.mask.shape[1]:
        raise typer.BadParameter(
            f"{path}: covers frames {blob['start']}..{blob['start'] + steps - 1} of {people} pedestrians; window "
            f"{w.name} has frames 0..{w.num_frames - 1} of {w.mask.shape[1]} pedestrians", param_hint="ROLLOUT"
        )  # fmt: skip
    frames = slice(blob["start"], blob["start"] + steps)
    return scene, w, frames, w.mask[frames] & blob["mask"]
