"""EnvSocial-Diff's commands `train|simulate|evaluate|render` (mounted as `flowlab crowd ...`) on the shared crowd
scenes (UCY students03, GC).

Data come from `--data` or $FLOWLAB_DATA (the folder holding `crowds/`). Trajectory files written by `simulate` are
torch files of tensors (`positions (R, T, P, 2)`, `mask (T, P)`, `start`), read back with weights_only=True.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from flowlab.crowd_sim.envsocial_diff.names import ABLATIONS
from flowlab.crowd_sim.names import SCENES

app = typer.Typer(help="EnvSocial-Diff crowd simulation: train, simulate, evaluate, render.")


def _scene(name: str, data: Path | None, frame: str):
    from flowlab.crowd_sim.data import load_scene

    if name not in SCENES:
        raise typer.BadParameter(f"unknown scene {name!r}; expected one of {', '.join(SCENES)}", param_hint="--scene")
    try:
        return load_scene(name, data, windows="all", frame=frame)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="--data") from err


def _window(scene, name: str):
    from flowlab.crowd_sim.data import SPLITS

    names = SPLITS[scene.name].get(name, (name,))
    if names[0] not in scene.windows:
        known = ", ".join([*SPLITS[scene.name], *scene.windows])
        raise typer.BadParameter(f"unknown window {name!r}; expected one of {known}", param_hint="--window")
    return scene.windows[names[0]]


def _policy(scene, checkpoint: Path | None, baseline: str | None, device: str, sampler: str, steps: int | None):
    from flowlab.crowd_sim.envsocial_diff.baselines import SocialForcePolicy, constant_velocity
    from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff
    from flowlab.crowd_sim.physics import DestinationForce, SocialForceParams

    if (checkpoint is None) == (baseline is None):
        raise typer.BadParameter("give exactly one of --checkpoint and --baseline", param_hint="--checkpoint")
    if baseline == "cv":
        return constant_velocity
    if baseline == "sfm":
        return SocialForcePolicy(scene, SocialForceParams(), DestinationForce())
    if baseline is not None:
        raise typer.BadParameter(f"unknown baseline {baseline!r}; expected sfm or cv", param_hint="--baseline")
    try:
        model = EnvSocialDiff.load(checkpoint, device=device)
        return model.policy(scene, sampler=sampler, sample_steps=steps)
    except (FileNotFoundError, ValueError) as err:
        raise typer.BadParameter(str(err), param_hint="--checkpoint") from err


@app.command("train")
def train_cmd(
    scene_name: str = typer.Option("ucy_students03", "--scene", help=f"one of {', '.join(SCENES)}"),
    ablation: str = typer.Option("full", "--ablation", help=f"one of {', '.join(ABLATIONS)}"),
    size: str = typer.Option("quick", "--size", help="network size and diffusion steps: quick | full"),
    epochs: int = typer.Option(10, "--epochs", help="teacher-forced epochs over the training windows"),
    finetune_steps: int = typer.Option(0, "--finetune-steps", help="multi-frame rollout fine-tuning steps"),
    frame_stride: int = typer.Option(1, "--frame-stride", help="train on every n-th recorded frame"),
    inits: int = typer.Option(
        1, "--inits", help="train this many initialisations and keep the best rollout of the validation window"
    ),
    out: Path = typer.Option(Path("envsocial.pt"), "--out", help="model file to write"),
    ckpt_dir: Path | None = typer.Option(None, "--ckpt-dir", help="training checkpoints, resumed (--inits 1 only)"),
    data: Path | None = typer.Option(None, "--data", help="data root holding crowds/ (default $FLOWLAB_DATA)"),
    frame: str = typer.Option("published", "--frame", help="UCY coordinate frame: published | corrected"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("cpu", "--device"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace a different run's checkpoints in --ckpt-dir"),
) -> None:
    """Train EnvSocial-Diff (or an ablation) on a scene's training windows and save it. --ckpt-dir resumes a run
    with the same options and refuses a different one unless --overwrite."""
    import torch

    from flowlab.core.cli import claim_run_option
    from flowlab.core.train import data_fingerprint
    from flowlab.crowd_sim.data import SPLITS
    from flowlab.crowd_sim.envsocial_diff.model import SIZES
    from flowlab.crowd_sim.envsocial_diff.objective import training_frames
    from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config
    from flowlab.crowd_sim.envsocial_diff.train import TrainConfig, calibrate, train, train_best_of

    if size not in SIZES:
        raise typer.BadParameter(f"expected quick or full, got {size!r}", param_hint="--size")
    if inits < 1 or (inits > 1 and ckpt_dir is not None):
        raise typer.BadParameter(f"expected --inits >= 1, and 1 with --ckpt-dir; got {inits}", param_hint="--inits")
    scene = _scene(scene_name, data, frame)
    try:
        config = scene_config(SIZES[size], ablation, scene)
        model = EnvSocialDiff(config, device=device)
        windows = [scene.windows[n] for n in SPLITS[scene.name]["train"]]
        calibrate(model, windows)
        frames = training_frames(model, scene, windows, stride=frame_stride)
        train_config = TrainConfig(epochs=epochs, finetune_steps=finetune_steps)
        if ckpt_dir is not None:
            spec = {"command": "crowd train", "scene": scene.name, "ablation": ablation, "size": size,
                    "frame": frame, "frame_stride": frame_stride, "train": train_config.to_dict(), "seed": seed,
                    "data_fingerprint": data_fingerprint(*(torch.as_tensor(w.positions) for w in windows))}  # fmt: skip
            claim_run_option(ckpt_dir, spec, overwrite=overwrite, option="--ckpt-dir")
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
    replicas: int = typer.Option(1, "--replicas", help="independent samples, batched"),
    sampler: str = typer.Option("ddpm", "--sampler", help="ddpm | ddim"),
    sample_steps: int | None = typer.Option(None, "--sample-steps", help="DDIM steps"),
    out: Path = typer.Option(Path("rollout.pt"), "--out"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("cpu", "--device"),
) -> None:
    """Roll a whole recorded window forward from its entry states and destinations; write the trajectories."""
    import torch

    from flowlab.crowd_sim.simulate import simulate_window

    scene = _scene(scene_name, data, frame)
    w = _window(scene, window)
    policy = _policy(scene, checkpoint, baseline, device, sampler, sample_steps)
    gen = torch.Generator(device).manual_seed(seed)
    traj = simulate_window(
        scene, w, policy, steps=steps, replicas=replicas, generator=gen, device=device, progress=True
    )  # fmt: skip
    n = traj.positions.shape[1] - 1
    out.parent.mkdir(parents=True, exist_ok=True)
    blob = {"positions": traj.positions.cpu(), "mask": traj.mask.cpu(), "start": traj.start, "window": w.name}
    torch.save({**blob, "scene": scene.name}, out)
    typer.echo(
        f"{w.name}: {n} frames, {replicas} replica(s) in {traj.seconds:.1f} s "
        f"({traj.agent_steps_per_second:.0f} pedestrian-steps/s); collisions {traj.collisions.tolist()}; wrote {out}"
    )


@app.command("evaluate")
def evaluate_cmd(
    rollout: Path = typer.Argument(..., help="a file written by `flowlab crowd simulate`"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
    out: Path | None = typer.Option(None, "--out", help="write the metrics as JSON"),
) -> None:
    """Simulation metrics (MAE, OT, MMD, DTW, FDE, collisions) of a rollout against the recorded window."""
    from flowlab.crowd_sim.metrics import simulation_metrics

    blob = _read_rollout(rollout)
    scene = _scene(blob["scene"], data, frame)
    w = _window(scene, blob["window"])
    frames = slice(blob["start"], blob["start"] + blob["positions"].shape[1])
    rows = [simulation_metrics(p, w.positions[frames], w.mask[frames]) for p in blob["positions"]]
    for r, row in enumerate(rows):
        typer.echo(f"replica {r}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()))
    if out is not None:
        out.write_text(json.dumps({"rollout": str(rollout), "replicas": rows}, indent=2))
        typer.echo(f"wrote {out}")


@app.command("render")
def render_cmd(
    rollout: Path = typer.Argument(..., help="a file written by `flowlab crowd simulate`"),
    out: Path = typer.Option(Path("rollout.gif"), "--out", help="a .gif animation, or a folder of PNG frames"),
    every: int = typer.Option(5, "--every", min=1, help="draw every n-th frame"),
    data: Path | None = typer.Option(None, "--data"),
    frame: str = typer.Option("published", "--frame"),
) -> None:
    """Draw a rollout over the scene's obstacles and objects of interest (recorded positions alongside)."""
    from flowlab.crowd_sim.render import render

    blob = _read_rollout(rollout)
    scene = _scene(blob["scene"], data, frame)
    w = _window(scene, blob["window"])
    frames = slice(blob["start"], blob["start"] + blob["positions"].shape[1])
    path = render(scene, blob["positions"][0], w.mask[frames], out, real=w.positions[frames], every=every)
    typer.echo(f"wrote {path}")


def _read_rollout(path: Path) -> dict:
    from flowlab.core.train import load_weights

    if not path.is_file():
        raise typer.BadParameter(f"{path} not found", param_hint="ROLLOUT")
    try:
        blob = load_weights(path, map_location="cpu", name="ROLLOUT")
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="ROLLOUT") from err
    if not isinstance(blob, dict) or not {"positions", "mask", "start", "window", "scene"} <= set(blob):
        raise typer.BadParameter(f"{path}: not a rollout written by `flowlab crowd simulate`", param_hint="ROLLOUT")
    return blob
