"""The trained candidates of crowd.envsocial.{ucy,gc}: every (ablation, initialisation) trained and scored on the
validation window as a `parallel_jobs` job, the best initialisation of each ablation kept. The teacher-forcing
frames every candidate of a scene shares are an artifact ("crowd.envsocial_frames"), built once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.bench import BenchContext, DataMissing, Job, Timer, torch_threads
from flowlab.core.config import Config
from flowlab.core.train import cpu_state_dict
from flowlab.crowd_sim.data import SPLITS, Window, load_scene, scene_files
from flowlab.crowd_sim.envsocial_diff.model import EnvSocialConfig
from flowlab.crowd_sim.envsocial_diff.objective import FrameBatch, pack_frames, training_frames, unpack_frames
from flowlab.crowd_sim.envsocial_diff.settings import EnvSocialBench
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config
from flowlab.crowd_sim.envsocial_diff.train import calibrate, train_best_of

__all__ = [
    "best_candidate",
    "candidate_jobs",
    "candidate_names",
    "case_window",
    "frames_artifact",
    "load_candidate",
    "load_case_scene",
]

_USED = ("train", "val", "test")


def _scene(scene_name: str, data_root: Path | str | None, window_frames: int | None):
    if data_root is None:
        raise DataMissing("crowds data set not found: FLOWLAB_DATA is not set - see the datasets README")
    used = [w for split in _USED for w in SPLITS[scene_name][split]]
    try:
        scene = load_scene(scene_name, data_root, windows=used)
    except FileNotFoundError as err:
        raise DataMissing(f"crowds data set not found: {err}") from err
    if window_frames is None:
        return scene
    return replace(scene, windows={k: w.subset(slice(window_frames)) for k, w in scene.windows.items()})


def load_case_scene(ctx: BenchContext, scene_name: str):
    """The scene of a case with the windows it uses (train, val, test), each cut to `window_frames` (None: whole)."""
    return _scene(scene_name, ctx.data_root, ctx.config.window_frames)


def case_window(scene, split: str) -> Window:
    """The first window of `split`."""
    return scene.windows[SPLITS[scene.name][split][0]]


@dataclass(frozen=True)
class FramesBuild(Config):
    """What the teacher-forcing frames of a scene depend on: the scene, the data root holding it, the window cut
    (`window_frames`), the frame stride and the network settings the probe model is built from."""

    scene: str
    data_root: str
    window_frames: int | None
    frame_stride: int
    model: EnvSocialConfig


def _build_frames(build: FramesBuild, folder: Path) -> None:
    """The teacher-forcing frames of the training windows (every branch's features; the denoiser masks what a
    configuration turns off), computed on the CPU (on one thread, as every artifact build is), saved as frames.pt."""
    scene = _scene(build.scene, build.data_root, build.window_frames)
    windows = [scene.windows[n] for n in SPLITS[scene.name]["train"]]
    probe = EnvSocialDiff(scene_config(build.model, "full", scene))
    calibrate(probe, windows)
    torch.save(pack_frames(training_frames(probe, scene, windows, stride=build.frame_stride)), folder / "frames.pt")


def frames_artifact(cfg: EnvSocialBench, scene_name: str, data_root: Path | str) -> Artifact:
    """The cached teacher-forcing frames of `scene_name`'s training windows under the settings `cfg`."""
    build = FramesBuild(scene_name, str(Path(data_root).resolve()), cfg.window_frames, cfg.frame_stride, cfg.model)
    files = scene_files(scene_name, data_root, windows="train")
    what = f"EnvSocial-Diff teacher-forcing frames of {scene_name}'s training windows"
    seconds = 12.0 if scene_name == "gc" else 4.0
    return Artifact("crowd.envsocial_frames", _build_frames, build, inputs=files, expected_seconds=seconds,
                    description=what)  # fmt: skip


#: per process: (scene, training windows, validation window, teacher-forcing frames) of a (case, scene) key, so that
#: a worker loads the frames once for all the candidates it trains
_TRAINING_DATA: dict[tuple, tuple] = {}


def _training_data(ctx: BenchContext, scene_name: str) -> tuple:
    """The scene, its training and validation windows and the teacher-forcing frames every ablation shares, read
    from the artifact cache (built on first use) once per process."""
    cfg: EnvSocialBench = ctx.config
    key = (scene_name, str(ctx.data_root), cfg.window_frames, cfg.frame_stride, cfg.model, str(ctx.device))
    if key not in _TRAINING_DATA:
        scene = load_case_scene(ctx, scene_name)
        windows = [scene.windows[n] for n in SPLITS[scene.name]["train"]]
        entry = ensure(frames_artifact(cfg, scene_name, ctx.data_root))
        frames: list[FrameBatch] = unpack_frames(torch.load(entry.path / "frames.pt", weights_only=True))
        if ctx.device.type != "cpu":
            frames = [FrameBatch(f.inputs.to(ctx.device), f.target.to(ctx.device), f.weight.to(ctx.device))
                      for f in frames]  # fmt: skip
        _TRAINING_DATA.clear()
        _TRAINING_DATA[key] = (scene, windows, case_window(scene, "val"), frames)
    return _TRAINING_DATA[key]


def _candidate(ctx: BenchContext, scene_name: str, ablation: str, seed: int) -> dict:
    """One initialisation of one ablation, trained and scored by its validation-window MAE (a `parallel_map` job:
    seeded by `seed` alone, so the result does not depend on the process that runs it)."""
    cfg: EnvSocialBench = ctx.config
    with torch_threads(cfg.threads):
        scene, windows, val, frames = _training_data(ctx, scene_name)
        with Timer(ctx.device) as tm:
            model, score = train_best_of(
                lambda: EnvSocialDiff(scene_config(cfg.model, ablation, scene), device=ctx.device),
                scene,
                windows,
                val,
                cfg.train,
                seeds=[seed],
                frames=frames,
                sampler=cfg.sampler,
                sample_steps=cfg.sample_steps,
                progress=False,
            )
    state = cpu_state_dict(model.denoiser)
    return {"state": state, "scale": model.scale, "val_mae": score[0], "seconds": tm.seconds}


#: expected seconds of one candidate on idle GC (one thread): the full model and the smaller ablations
_CANDIDATE_COST = {"full": 50.0, "other": 37.0}


def candidate_jobs(ctx: BenchContext, scene, ablations: list[str]) -> dict[str, Job]:
    """The `parallel_jobs` jobs "train:<ablation>:<i>": initialisation i of each ablation, seeded by (case seed,
    ablation index, i) alone, so the candidates do not depend on the order or the process."""
    cfg: EnvSocialBench = ctx.config
    worker_ctx = replace(ctx, generator=None)
    return {
        f"train:{a}:{j}": Job(
            _candidate,
            (worker_ctx, scene.name, a, ctx.seed * 1000 + 10 * i + j),
            cost=_CANDIDATE_COST["full" if a == "full" else "other"],
        )
        for i, a in enumerate(ablations)
        for j in range(cfg.inits)
    }


def candidate_names(ablation: str, inits: int) -> tuple[str, ...]:
    """The job names of `ablation`'s candidates in `candidate_jobs`."""
    return tuple(f"train:{ablation}:{j}" for j in range(inits))


def best_candidate(done: Mapping[str, dict], ablation: str, inits: int) -> tuple[dict, dict[str, float]]:
    """The candidate of `ablation` with the lowest validation MAE among the finished jobs `done`, and the
    ablation's training metrics (summed training seconds, selected and worst validation MAE)."""
    mine = [done[name] for name in candidate_names(ablation, inits)]
    scores = [r["val_mae"] for r in mine]
    best = mine[scores.index(min(scores))]
    metrics = {"train_seconds": sum(r["seconds"] for r in mine), "val_mae_selected": min(scores),
               "val_mae_worst": max(scores)}  # fmt: skip
    return best, metrics


def load_candidate(config: EnvSocialConfig, candidate: dict, device: torch.device) -> EnvSocialDiff:
    """The trained model of one candidate job's result (its denoiser's weights and scale) for the model `config`, on
    `device`, in evaluation mode."""
    model = EnvSocialDiff(config, device=device)
    model.denoiser.load_state_dict(candidate["state"])
    model.denoiser.eval()
    model.scale = candidate["scale"]
    return model
