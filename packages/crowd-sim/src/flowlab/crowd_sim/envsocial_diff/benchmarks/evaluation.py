"""The evaluation jobs of crowd.envsocial.{ucy,gc}, each a `parallel_jobs` job seeded by the case's seed and its
offset alone: a trained model's test-window rollout, prediction mode and speed, and the social-force and
constant-velocity baselines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from flowlab.core.bench import BenchContext, Job, torch_threads
from flowlab.crowd_sim.data import SPLITS, Window
from flowlab.crowd_sim.envsocial_diff.baselines import SocialForcePolicy, calibrate_social_force, constant_velocity
from flowlab.crowd_sim.envsocial_diff.benchmarks.candidates import (
    best_candidate,
    candidate_names,
    case_window,
    load_candidate,
)
from flowlab.crowd_sim.envsocial_diff.predict import evaluate_prediction
from flowlab.crowd_sim.envsocial_diff.settings import EnvSocialBench
from flowlab.crowd_sim.envsocial_diff.simulator import scene_config
from flowlab.crowd_sim.metrics import simulation_metrics
from flowlab.crowd_sim.physics import DestinationForce
from flowlab.crowd_sim.simulate import InitialStates, simulate, simulate_window

__all__ = ["evaluation_job"]


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


def _speed(scene, policy, ctx: BenchContext, cfg: EnvSocialBench) -> dict[str, float]:
    """Pedestrians x steps per second of `policy` for `speed_pedestrians` pedestrians over `speed_steps` steps on a
    synthetic 30 m plaza."""
    n, steps = cfg.speed_pedestrians, cfg.speed_steps
    gen = torch.Generator().manual_seed(ctx.seed)
    pos = torch.rand(n, 2, generator=gen) * 30
    dest = torch.rand(n, 2, generator=gen) * 30
    vel = 1.2 * torch.nn.functional.normalize(dest - pos, dim=-1)
    hist = torch.cat([pos, vel, torch.zeros_like(pos)], dim=-1)[:, None].repeat(1, 8, 1)
    init = InitialStates(pos, vel, hist, torch.zeros(n, dtype=torch.long), torch.full((n,), 10**9))
    g = torch.Generator(ctx.device).manual_seed(ctx.seed)
    traj = simulate(scene, init, dest, steps, model=policy, generator=g, device=ctx.device)
    return {
        "speed_agent_steps_per_s": traj.agent_steps_per_second,
        "speed_seconds": traj.seconds,
        "speed_nfe_per_step": float(traj.nfe_per_step),
    }


def _prediction(scene, test: Window, policy, ctx: BenchContext, cfg: EnvSocialBench, k: int) -> dict[str, float]:
    """Prediction mode: minADE / minFDE of `k` samples (as "min_ade20", "min_fde20") and the pedestrians scored."""
    gen = torch.Generator(ctx.device).manual_seed(ctx.seed * 1000 + 300)
    pred = evaluate_prediction(
        scene, test, policy, k=k, stride=cfg.pred_stride, frame_step=cfg.pred_frame_step, generator=gen,
        device=ctx.device,
    )  # fmt: skip
    return {f"{name}20" if name != "pred_pedestrians" else name: v for name, v in pred.items()}


def _evaluate(ctx: BenchContext, scene, job: str, offset: int, ablation: str | None, candidate: dict | None) -> dict:
    """One evaluation job of a case (a `parallel_jobs` job, seeded by the case's seed and `offset` alone): "rollout"
    (the test-window rollout of `ablation`'s trained `candidate`), "prediction" and "speed" of it, "SFM" (calibrated
    on the first training window; rollout and speed), "ConstantVelocity" (rollout and prediction). Returns the
    metrics, the first replica's positions (rollouts) and the SFM parameters (SFM)."""
    cfg: EnvSocialBench = ctx.config
    out: dict[str, Any] = {"metrics": {}}
    with torch_threads(cfg.threads):
        test = case_window(scene, "test")
        if job == "SFM":
            dest_force = DestinationForce()
            train = scene.windows[SPLITS[scene.name]["train"][0]]
            out["sfm_params"], _ = calibrate_social_force(scene, train, dest_force, frames=cfg.sfm_frames)
            policy = SocialForcePolicy(scene, out["sfm_params"], dest_force)
        elif job == "ConstantVelocity":
            policy = constant_velocity
        else:
            model = load_candidate(scene_config(cfg.model, ablation, scene), candidate, ctx.device)
            policy = model.policy(scene, sampler=cfg.sampler, sample_steps=cfg.sample_steps)
        if job in ("rollout", "SFM", "ConstantVelocity"):
            traj = _simulate(scene, test, policy, ctx, cfg.replicas if job == "rollout" else 1, offset)
            out["metrics"].update(_rollout_metrics(traj, test))
            out["positions"], out["nfe_per_step"] = traj.positions[0].cpu(), traj.nfe_per_step
        if job in ("prediction", "ConstantVelocity"):
            k = 1 if job == "ConstantVelocity" else cfg.pred_k
            out["metrics"].update(_prediction(scene, test, policy, ctx, cfg, k))
        if job in ("speed", "SFM"):
            out["metrics"].update(_speed(scene, policy, ctx, cfg))
    return out


#: expected seconds of the evaluation jobs on idle GC (one thread), for `parallel_jobs`' longest-first order
_EVAL_COST = {"prediction": 27.0, "rollout": 13.0, "SFM": 6.0, "speed": 4.0, "ConstantVelocity": 3.0}


def evaluation_job(ctx: BenchContext, scene, kind: str, offset: int, ablation: str | None) -> Job:
    """The `parallel_jobs` job evaluating `ablation`'s best candidate (None: a baseline), once its candidates are
    trained."""
    inits = ctx.config.inits
    after = candidate_names(ablation, inits) if ablation else ()

    def args(done: Mapping[str, dict]) -> tuple:
        candidate = best_candidate(done, ablation, inits)[0] if ablation else None
        return (ctx, scene, kind, offset, ablation, candidate)

    return Job(_evaluate, args, after=after, cost=_EVAL_COST[kind])
