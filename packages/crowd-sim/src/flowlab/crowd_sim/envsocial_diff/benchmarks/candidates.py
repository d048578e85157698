"""The trained candidates of crowd.envsocial.{ucy,gc}: every (ablation, initialisation) trained and scored on the
validation window in `parallel_map` workers, the best initialisation of each ablation kept."""

from __future__ import annotations

from dataclasses import replace

from flowlab.core.bench import BenchContext, DataMissing, Timer, parallel_map, torch_threads
from flowlab.crowd_sim.data import SPLITS, Window, load_scene
from flowlab.crowd_sim.envsocial_diff.objective import training_frames
from flowlab.crowd_sim.envsocial_diff.settings import EnvSocialBench
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config
from flowlab.crowd_sim.envsocial_diff.train import calibrate, train_best_of

__all__ = ["case_window", "load_case_scene", "train_ablations"]


def load_case_scene(ctx: BenchContext, scene_name: str):
    """The scene of a case with the windows it uses (train, val, test), each cut to `window_frames` (None: whole)."""
    if ctx.data_root is None:
        raise DataMissing("crowds data set not found: FLOWLAB_DATA is not set - see the datasets README")
    n = ctx.config.window_frames
    used = [w for split in ("train", "val", "test") for w in SPLITS[scene_name][split]]
    try:
        scene = load_scene(scene_name, ctx.data_root, windows=used)
    except FileNotFoundError as err:
        raise DataMissing(f"crowds data set not found: {err}") from err
    return scene if n is None else replace(scene, windows={k: w.subset(slice(n)) for k, w in scene.windows.items()})


def case_window(scene, split: str) -> Window:
    """The first window of `split`."""
    return scene.windows[SPLITS[scene.name][split][0]]


#: per process: (scene, training windows, validation window, teacher-forcing frames) of a (case, scene) key, so that
#: a worker computes the frames once for all the candidates it trains
_TRAINING_DATA: dict[tuple, tuple] = {}


def _training_data(ctx: BenchContext, scene_name: str) -> tuple:
    """The scene, its training and validation windows and the teacher-forcing frames every ablation shares (the
    denoiser masks what a configuration turns off), computed once per process."""
    cfg: EnvSocialBench = ctx.config
    key = (scene_name, str(ctx.data_root), cfg.window_frames, cfg.frame_stride, cfg.model, str(ctx.device))
    if key not in _TRAINING_DATA:
        scene = load_case_scene(ctx, scene_name)
        windows = [scene.windows[n] for n in SPLITS[scene.name]["train"]]
        probe = EnvSocialDiff(scene_config(cfg.model, "full", scene), device=ctx.device)
        calibrate(probe, windows)
        frames = training_frames(probe, scene, windows, stride=cfg.frame_stride)
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
    state = {k: v.cpu() for k, v in model.denoiser.state_dict().items()}
    return {"state": state, "scale": model.scale, "val_mae": score[0], "seconds": tm.seconds}


def train_ablations(ctx: BenchContext, scene, ablations: list[str]) -> dict[str, tuple]:
    """Every ablation's best of `inits` initialisations by validation-window MAE: {ablation: (model, metrics)}.
    The candidates train in `workers` processes (one torch thread each); the initialisation seeds do not depend on
    the order or the process."""
    cfg: EnvSocialBench = ctx.config
    jobs = [(a, ctx.seed * 1000 + 10 * i + j) for i, a in enumerate(ablations) for j in range(cfg.inits)]
    names, seeds = [a for a, _ in jobs], [s for _, s in jobs]
    results = parallel_map(_candidate, [replace(ctx, generator=None)] * len(jobs), [scene.name] * len(jobs), names,
                           seeds, workers=cfg.workers)  # fmt: skip
    out = {}
    for ablation in ablations:
        mine = [r for name, r in zip(names, results, strict=True) if name == ablation]
        best = min(mine, key=lambda r: r["val_mae"])
        model = EnvSocialDiff(scene_config(cfg.model, ablation, scene), device=ctx.device)
        model.denoiser.load_state_dict(best["state"])
        model.denoiser.eval()
        model.scale = best["scale"]
        scores = [r["val_mae"] for r in mine]
        out[ablation] = (model, {"train_seconds": sum(r["seconds"] for r in mine), "val_mae_selected": min(scores),
                                 "val_mae_worst": max(scores)})  # fmt: skip
    return out
