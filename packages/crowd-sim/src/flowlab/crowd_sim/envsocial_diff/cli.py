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

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, SEEDS, json_text
from flowlab.crowd_sim.envsocial_diff.names import ABLATIONS, SAMPLERS
from flowlab.crowd_sim.names import FRAMES, SCENES

app = typer.Typer(help="EnvSocial-Diff crowd simulation: train, simulate, predict, evaluate, render, export.")

BASELINES = ("sfm", "cv")
ROLLOUT_HELP = "a file written by `flowlab crowd simulate` or `flowlab crowd predict`"


def _choice(value: str, choices: tuple[str, ...], option: str, what: str) -> None:
    if value not in choices:
        expected = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
        raise typer.BadParameter(f"unknown {what} {value!r}; expected {expected}", param_hint=option)


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
    from flowlab.core.cli import device_option

    _choice(scene_name, SCENES, "--scene", "scene")
    _choice(frame, FRAMES, "--frame", "frame")
    _choice(sampler, SAMPLERS, "--sampler", "sampler")
    if (checkpoint is None) == (baseline is None):
        raise typer.BadParameter("give exactly one of --checkpoint and --baseline", param_hint="--checkpoint")
    if baseline is not None:
        _choice(baseline, BASELINES, "--baseline", "baseline")
    device = device_option(device)
    name = _window_name(scene_name, window)
    model = None if checkpoint is None else _model(checkpoint, device, sampler, sample_steps)
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
    """Train EnvSocial-Diff (or an ablation) on a scene's training windows and save it. --resume continues the run
    in --ckpt-dir with the same options; a different one there is refused unless --overwrite."""
    import torch

    from flowlab.core.cli import claim_run_option, device_option, option_error
    from flowlab.core.nets import seeded_init
    from flowlab.core.train import data_fingerprint
    from flowlab.crowd_sim.data import SPLITS
    from flowlab.crowd_sim.envsocial_diff.model import SIZES
    from flowlab.crowd_sim.envsocial_diff.objective import training_frames
    from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config
    from flowlab.crowd_sim.envsocial_diff.train import TrainConfig, calibrate, train, train_best_of

    _choice(scene_name, SCENES, "--scene", "scene")
    _choice(ablation, tuple(ABLATIONS), "--ablation", "ablation")
    _choice(size, tuple(SIZES), "--size", "size")
    _choice(frame, FRAMES, "--frame", "frame")
    if inits < 1 or (inits > 1 and ckpt_dir is not None):
        raise typer.BadParameter(f"expected --inits >= 1, and 1 with --ckpt-dir; got {inits}", param_hint="--inits")
    device = device_option(device)
    try:
        train_config = TrainConfig(epochs=epochs, finetune_steps=finetune_steps)
    except ValueError as err:
        raise option_error(err) from err
    scene = _scene(scene_name, data, frame)
    windows = [scene.windows[n] for n in SPLITS[scene.name]["train"]]
    if ckpt_dir is not None:
        spec = {"command": "crowd train", "scene": scene.name, "ablation": ablation, "size": size, "frame": frame,
                "frame_stride": frame_stride, "train": train_config.to_dict(), "seed": seed,
                "data_fingerprint": data_fingerprint(*(torch.as_tensor(w.positions) for w in windows))}  # fmt: skip
        claim_run_option(ckpt_dir, spec, overwrite=overwrite, resume=resume, option="--ckpt-dir")
    try:
        config = scene_config(SIZES[size], ablation, scene)
        with seeded_init(seed):  # the initial weights and dropout come from --seed alone
            model = EnvSocialDiff(config, device=device)
            calibrate(model, windows)
            frames = training_frames(model, scene, windows, stride=frame_stride)
            if inits == 1:
                train(model, scene, windows, train_config, generator=torch.Generator(device).manual_seed(seed),
                      ckpt_dir=ckpt_dir, frames=frames)  # fmt: skip
            else:
                val = scene.windows[SPLITS[scene.name]["val"][0]]
                model, scores = train_best_of(
                    lambda: EnvSocialDiff(config, device=device), scene, windows, val, train_config,
                    seeds=[seed * 1000 + j for j in range(inits)], frames=frames,
                )  # fmt: skip
                typer.echo("validation MAE per initialisation: " + ", ".join(f"{v:.3f}" for v in scores))
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
    checkpoint: Path | None = typer.Option(None, "--checkpoint", help="a model written by `flowlab crowd train`"),
    baseline: str | None = typer.Option(None, "--baseline", help="sfm | cv instead of a model"),
    window: str = typer.Option("test", "--window", help="a split name or a window name (e.g. time162-216)"),
    start: int | None = typer.Option(
        None, "--start", min=0, help="the last observed frame of the window (default: the first with --observe before)"
    ),
    observe: int = typer.Option(8, "--observe", min=2, help="observed frames; who is present in all is predicted"),
    horizon: int = typer.Option(12, "--horizon", min=1, help="frames to predict after --start (0.08 s each)"),
    samples: int = typer.Option(20, "--samples", min=1, help="k sampled futures (the rollout's replicas), batched"),
    known_destinations: bool = typer.Option(
        False, "--known-destinations", help="walk to the recorded exits (default: constant-velocity goals 8 s ahead)"
    ),
    sampler: str = typer.Option("ddpm", "--sampler", help="ddpm | ddim"),
    sample_steps: int | None = typer.Option(None, "--sample-steps", min=1, help="DDIM steps"),
    out: Path = typer.Option(Path("prediction.pt"), "--out"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
) -> None:
    """Forecast the pedestrians observed up to --start: k sampled futures of --horizon frames, jointly, from the
    --observe frames before; written as a rollout of the window (`evaluate`, `render` and `export` read it)."""
    import torch

    from flowlab.core.cli import option_error
    from flowlab.crowd_sim.envsocial_diff.predict import predict_window

    scene, w, policy, device = _rollout_setup(
        scene_name, checkpoint, baseline, window, sampler, sample_steps, data, frame, device
    )
    gen = torch.Generator(device).manual_seed(seed)
    try:
        traj = predict_window(scene, w, policy, samples, start=start, observe=observe, horizon=horizon,
                              known_destinations=known_destinations, generator=gen, device=device)  # fmt: skip
    except ValueError as err:
        raise option_error(err, {"k": "--samples"}) from err
    _save_rollout(traj, scene, w, out)


@app.command("evaluate")
def evaluate_cmd(
    rollout: Path = typer.Argument(..., help=ROLLOUT_HELP),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    out: Path | None = typer.Option(None, "--out", help="write the metrics as JSON"),
) -> None:
    """Simulation metrics (MAE, OT, MMD, DTW, FDE, collisions) of a rollout against the recorded window, where both
    have the pedestrian."""
    from flowlab.crowd_sim.metrics import simulation_metrics

    _choice(frame, FRAMES, "--frame", "frame")
    blob = _read_rollout(rollout)
    _, w, frames, mask = _recorded(rollout, blob, data, frame)
    rows = [simulation_metrics(p, w.positions[frames], mask) for p in blob["positions"]]
    for r, row in enumerate(rows):
        typer.echo(f"replica {r}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json_text({"rollout": str(rollout), "replicas": rows}, indent=2))
        typer.echo(f"wrote {out}")


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

    _choice(frame, FRAMES, "--frame", "frame")
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

    _choice(frame, FRAMES, "--frame", "frame")
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
