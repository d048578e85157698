"""Benchmark scenarios crowd.envsocial.{ucy,gc}: EnvSocial-Diff against social force, constant velocity and the
SPDiff-like model (environment branch off, edge features r_ij only), plus the ablation ladder, all trained and rolled
out in the same process on the shared crowd windows.

Simulation protocol: the whole test window (UCY 162-216 s, GC 2344-2404 s) is rolled out from the recorded entry
states and destinations; metrics MAE, OT, MMD, DTW, FDE and collision events (< 0.5 m) of the simulated against the
recorded positions. Stochastic models are sampled with 3 sampler seeds (batched replicas): the metrics are their mean,
`<metric>_std` the standard deviation. Prediction mode: observe 8 frames, sample 20 futures of 12 frames, minADE20 /
minFDE20 against constant velocity. Speed: 200 pedestrians for 200 steps on a synthetic plaza.
UCY uses the published (SPDiff) coordinate frame, for comparability with the papers; UCY ships no scene image, so the
lighting branch runs on GC only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from flowlab.core.bench import BenchContext, BenchResult, DataMissing, Scenario, Timer, torch_threads
from flowlab.crowd_sim.baselines import SocialForcePolicy, calibrate_social_force, constant_velocity
from flowlab.crowd_sim.data import SPLITS, Window, load_scene
from flowlab.crowd_sim.envsocial import EnvSocialDiff, scene_categories
from flowlab.crowd_sim.features import FeatureConfig
from flowlab.crowd_sim.metrics import simulation_metrics
from flowlab.crowd_sim.model import SIZES, EnvSocialConfig
from flowlab.crowd_sim.physics import DestinationForce
from flowlab.crowd_sim.predict import evaluate_prediction
from flowlab.crowd_sim.simulate import InitialStates, simulate, simulate_window
from flowlab.crowd_sim.train import TrainConfig, calibrate, train_best_of, training_frames

__all__ = ["SCENARIOS"]

PUBLISHED = {
    "ucy_students03": {
        "EnvSocial-Diff [paper, unverified]": {"mae": 1.8182, "ot": 3.7292, "mmd": 0.0598},
        "SPDiff [paper, unverified]": {"mae": 1.8760, "ot": 4.0564, "mmd": 0.0671},
        "SFM [paper, unverified]": {"mae": 2.5390, "ot": 6.5710, "mmd": 0.1290},
        "EnvSocial-Diff no env [paper, unverified]": {"mae": 1.8597, "ot": 3.8945, "mmd": 0.0626},
        "EnvSocial-Diff +obstacles [paper, unverified]": {"mae": 1.8337},
        "EnvSocial-Diff +OOI [paper, unverified]": {"mae": 1.8271},
    },
    "gc": {
        "EnvSocial-Diff [paper, unverified]": {"mae": 0.8861, "ot": 1.3339, "mmd": 0.0087},
        "SPDiff [paper, unverified]": {"mae": 0.9116, "ot": 1.3925, "mmd": 0.0092},
        "SFM [paper, unverified]": {"mae": 1.2590, "ot": 2.1140, "mmd": 0.0150},
    },
}


def _load(ctx: BenchContext, scene_name: str):
    if ctx.data_root is None:
        raise DataMissing("crowds data set not found: FLOWLAB_DATA is not set - see the datasets README")
    try:
        return load_scene(scene_name, ctx.data_root, windows="all")
    except FileNotFoundError as err:
        raise DataMissing(f"crowds data set not found: {err}") from err


def _window(scene, split: str) -> Window:
    return scene.windows[SPLITS[scene.name][split][0]]


def _rollout_metrics(traj, real: Window) -> dict[str, float]:
    runs = [
        simulation_metrics(traj.positions[r].cpu(), real.positions, real.mask) for r in range(traj.positions.shape[0])
    ]
    out = {}
    for key in runs[0]:
        values = torch.tensor([r[key] for r in runs], dtype=torch.float64)
        out[key] = float(values.mean())
        if len(runs) > 1:
            out[f"{key}_std"] = float(values.std())
    out["sim_seconds"] = traj.seconds
    out["agent_steps_per_s"] = traj.agent_steps_per_second
    return out


def _simulate(scene, window: Window, policy, ctx: BenchContext, replicas: int, offset: int):
    gen = torch.Generator(ctx.device).manual_seed(ctx.seed * 1000 + offset)
    return simulate_window(scene, window, policy, replicas=replicas, generator=gen, device=ctx.device)


def _speed(scene, model: EnvSocialDiff, ctx: BenchContext, cfg: Mapping[str, Any], sfm) -> dict[str, dict[str, float]]:
    """Pedestrians x steps per second for 200 pedestrians over 200 steps on a synthetic 30 m plaza."""
    n, steps = cfg["speed_pedestrians"], cfg["speed_steps"]
    gen = torch.Generator().manual_seed(ctx.seed)
    pos = torch.rand(n, 2, generator=gen) * 30
    dest = torch.rand(n, 2, generator=gen) * 30
    vel = 1.2 * torch.nn.functional.normalize(dest - pos, dim=-1)
    hist = torch.cat([pos, vel, torch.zeros_like(pos)], dim=-1)[:, None].repeat(1, 8, 1)
    init = InitialStates(pos, vel, hist, torch.zeros(n, dtype=torch.long), torch.full((n,), 10**9))
    out = {}
    ours = model.policy(scene, sampler=cfg["sampler"], sample_steps=cfg.get("sample_steps"))
    for label, policy in (("full", ours), ("SFM", sfm)):
        g = torch.Generator(ctx.device).manual_seed(ctx.seed)
        traj = simulate(scene, init, dest, steps, model=policy, generator=g, device=ctx.device)
        out[label] = {
            "speed_agent_steps_per_s": traj.agent_steps_per_second,
            "speed_seconds": traj.seconds,
            "speed_nfe_per_step": float(traj.nfe_per_step),
        }
    return out


def _plots(ctx: BenchContext, scene, test: Window, trajs: Mapping[str, Any]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from flowlab.crowd_sim.render import plot_alignment

    paths = [plot_alignment(scene, test, ctx.out_dir / f"crowd_{scene.name}_alignment.png")]
    fig, axes = plt.subplots(1, len(trajs) + 1, figsize=(4.5 * (len(trajs) + 1), 4.5), sharex=True, sharey=True)
    panels = {"recorded": test.positions[None]} | {_LABELS[k]: v.positions[:1].cpu() for k, v in trajs.items()}
    for ax, (label, pos) in zip(axes, panels.items(), strict=True):
        for b in scene.obstacles.corners:
            ax.fill(b[:, 0], b[:, 1], color="grey", alpha=0.5)
        for b in scene.interests.corners:
            ax.fill(b[:, 0], b[:, 1], color="orange", alpha=0.4)
        for p in range(pos.shape[2]):
            m = test.mask[:, p]
            ax.plot(pos[0, m, p, 0], pos[0, m, p, 1], lw=0.6)
        ax.set_title(label)
        ax.set_aspect("equal")
    lo = test.positions[test.mask].min(0).values - 2
    hi = test.positions[test.mask].max(0).values + 2
    axes[0].set_xlim(float(lo[0]), float(hi[0]))
    axes[0].set_ylim(float(lo[1]), float(hi[1]))
    fig.tight_layout()
    path = ctx.out_dir / f"crowd_{scene.name}_rollouts.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return [*paths, path]


def _run(ctx: BenchContext, scene_name: str) -> BenchResult:
    cfg = ctx.config
    scene = _load(ctx, scene_name)
    with torch_threads(cfg.get("threads")):
        test = _window(scene, "test")
        train_windows = [scene.windows[n] for n in SPLITS[scene.name]["train"]]
        dest_force = DestinationForce()
        sfm_params, _ = calibrate_social_force(scene, train_windows[0], dest_force, frames=cfg["sfm_frames"])
        sfm = SocialForcePolicy(scene, sfm_params, dest_force)
        val = _window(scene, "val")
        # one set of training inputs serves every ablation (the denoiser masks what a configuration turns off)
        probe = EnvSocialDiff(_model_config(scene, "full", cfg), destination_force=dest_force, device=ctx.device)
        calibrate(probe, train_windows)
        frames = training_frames(probe, scene, train_windows, stride=cfg["frame_stride"])
        ablations = ["full", "spdiff", *(a for a in cfg["ablations"] if scene.image is not None or a != "lighting")]
        metrics, trajs, models = {}, {}, {}
        for i, ablation in enumerate(ablations):
            # initialisation seeds independent of run order; the best of `inits` by validation-window MAE is kept
            seeds = [ctx.seed * 1000 + 10 * i + j for j in range(cfg["inits"])]
            with Timer(ctx.device) as tm:
                model, val_mae = train_best_of(
                    lambda ab=ablation: EnvSocialDiff(
                        _model_config(scene, ab, cfg), destination_force=dest_force, device=ctx.device
                    ),
                    scene,
                    train_windows,
                    val,
                    TrainConfig(**cfg["train"]),
                    seeds=seeds,
                    frames=frames,
                    sampler=cfg["sampler"],
                    sample_steps=cfg.get("sample_steps"),
                    progress=False,
                )
            policy = model.policy(scene, sampler=cfg["sampler"], sample_steps=cfg.get("sample_steps"))
            traj = _simulate(scene, test, policy, ctx, cfg["replicas"], 100 + i)
            metrics[ablation] = {
                **_rollout_metrics(traj, test),
                "train_seconds": tm.seconds,
                "val_mae_selected": min(val_mae),
                "val_mae_worst": max(val_mae),
            }
            trajs[ablation], models[ablation] = traj, model
        for label, policy in (("SFM", sfm), ("ConstantVelocity", constant_velocity)):
            trajs[label] = _simulate(scene, test, policy, ctx, 1, 200)
            metrics[label] = _rollout_metrics(trajs[label], test)
        full_policy = models["full"].policy(scene, sampler=cfg["sampler"], sample_steps=cfg.get("sample_steps"))
        for key, known in (("", True), ("_nodest", False)):
            for label, policy, k in (("full", full_policy, cfg["pred_k"]), ("ConstantVelocity", constant_velocity, 1)):
                gen = torch.Generator(ctx.device).manual_seed(ctx.seed * 1000 + 300)
                pred = evaluate_prediction(
                    scene,
                    test,
                    policy,
                    k=k,
                    stride=cfg["pred_stride"],
                    known_destinations=known,
                    generator=gen,
                    device=ctx.device,
                )
                metrics[label].update(
                    {f"{name}20{key}" if name != "pred_pedestrians" else name: v for name, v in pred.items()}
                )
        for label, values in _speed(scene, models["full"], ctx, cfg, sfm).items():
            metrics[label].update(values)
        ours = metrics.pop("full")
        ours["sfm_A"], ours["sfm_B"] = sfm_params.A, sfm_params.B
        names = {"spdiff": "SPDiff-like", "SFM": "SFM", "ConstantVelocity": "ConstantVelocity"}
        baselines = {names.get(k, f"ablation:{k}"): v for k, v in metrics.items()}
        plots = _plots(ctx, scene, test, {k: trajs[k] for k in ("full", "spdiff", "SFM", "ConstantVelocity")})
    return BenchResult(
        metrics=ours,
        baselines=baselines,
        references=PUBLISHED[scene_name],
        plots=plots,
        nfe={"per_simulated_frame": int(trajs["full"].nfe_per_step)},
    )


def _model_config(scene, ablation: str, cfg: Mapping[str, Any]) -> EnvSocialConfig:
    return EnvSocialConfig.ablation(
        ablation,
        categories=scene_categories(scene),
        features=FeatureConfig.from_constants(scene.constants),
        **cfg["model"],
    )


def _run_ucy(ctx: BenchContext) -> BenchResult:
    return _run(ctx, "ucy_students03")


def _run_gc(ctx: BenchContext) -> BenchResult:
    return _run(ctx, "gc")


_LABELS = {"full": "EnvSocial-Diff", "spdiff": "SPDiff-like", "SFM": "SFM", "ConstantVelocity": "constant velocity"}
_BASE = {
    "threads": 2,
    "sampler": "ddim",
    "sample_steps": 10,
    "replicas": 3,
    "frame_stride": 1,
    "sfm_frames": 250,
    "pred_k": 20,
    "pred_stride": 40,
    "speed_pedestrians": 200,
    "speed_steps": 200,
}
QUICK = {
    **_BASE,
    "inits": 2,
    "model": SIZES["quick"],
    "train": {"epochs": 8, "batch_frames": 16, "finetune_steps": 40},
    "ablations": ("no_env",),
}
FULL = {
    **_BASE,
    "inits": 3,
    "model": SIZES["full"],
    "train": {"epochs": 8, "batch_frames": 16, "finetune_steps": 200},
    "ablations": ("no_env", "obstacles", "ooi", "no_sim"),
}
_DIRECTIONS = {
    "mae": "min",
    "ot": "min",
    "mmd": "min",
    "dtw": "min",
    "fde": "min",
    "collisions": "min",
    "min_ade20": "min",
    "min_fde20": "min",
    "speed_agent_steps_per_s": "max",
}


def _scenario(name: str, run, description: str) -> Scenario:
    return Scenario(
        name=name,
        package="crowd-sim",
        method="envsocial",
        run=run,
        variants={"quick": QUICK, "full": FULL},
        directions=_DIRECTIONS,
        tags=frozenset({"crowd", "simulation", "diffusion"}),
        description=description,
    )


SCENARIOS = (
    _scenario(
        "crowd.envsocial.ucy",
        _run_ucy,
        "UCY students03: train 0-108 s, simulate the 162-216 s window; SFM, constant velocity, SPDiff-like and the "
        "no-environment ablation in the same run; prediction mode minADE20/minFDE20; 200x200 speed.",
    ),
    _scenario(
        "crowd.envsocial.gc",
        _run_gc,
        "Grand Central: train 2104-2284 s, simulate 2344-2404 s; lighting from the scene image; baselines and "
        "ablations as for UCY.",
    ),
)
