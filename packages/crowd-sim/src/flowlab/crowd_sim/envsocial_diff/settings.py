"""The typed settings of the crowd.envsocial scenarios: `EnvSocialBench` (its defaults are the full variant), the
quick variant and the smoke variant derived from it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from flowlab.core.config import Config
from flowlab.crowd_sim.envsocial_diff.model import SIZES, EnvSocialConfig
from flowlab.crowd_sim.envsocial_diff.train import TrainConfig

__all__ = [
    "FORECAST_FULL",
    "FORECAST_QUICK",
    "FORECAST_SMOKE",
    "FULL",
    "QUICK",
    "SMOKE",
    "EnvSocialBench",
    "ForecastBench",
]


@dataclass(frozen=True)
class EnvSocialBench(Config):
    """Settings of both scenes. `model`: the network size (a `SIZES` entry; each trained variant takes its branches
    from its ablation and its categories and neighbourhoods from the scene, `simulator.scene_config`); `train`: every
    variant's training; `inits`: initialisations per variant, the best validation-window rollout kept;
    `ablations`: trained beside the full and SPDiff-like models ("lighting" only where the scene has an image);
    `threads`: torch threads (None: leave as is); `workers`: processes training the candidates (ablation x
    initialisation) side by side, one torch thread each (capped by the CPU cores); `sampler`, `sample_steps`: rollout
    sampling; `replicas`: sampler seeds per rollout; `frame_stride`: teacher-forced frames; `sfm_frames`: frames
    of the SFM (A, B) sweep;
    `pred_k`, `pred_stride`, `pred_frame_step`: prediction-mode samples, start-frame stride and frames between
    scored positions; `speed_*`: the synthetic speed test; `window_frames`: only the windows the scenario uses, each
    cut to its first frames (`Window.subset`; None: every window whole, as quick and full)."""

    model: EnvSocialConfig = field(default_factory=lambda: SIZES["full"])
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=8, batch_frames=16, finetune_steps=200))
    inits: int = 3
    ablations: tuple[Literal["no_env", "obstacles", "ooi", "lighting", "no_sim"], ...] = (
        "no_env",
        "obstacles",
        "ooi",
        "no_sim",
    )
    threads: int | None = 1
    workers: int = 1
    sampler: Literal["ddpm", "ddim"] = "ddim"
    sample_steps: int | None = 10
    replicas: int = 3
    frame_stride: int = 1
    sfm_frames: int = 250
    pred_k: int = 20
    pred_stride: int = 40
    pred_frame_step: int = 5
    speed_pedestrians: int = 200
    speed_steps: int = 200
    window_frames: int | None = None


FULL = EnvSocialBench()
QUICK = replace(
    FULL,
    model=SIZES["quick"],
    train=replace(FULL.train, finetune_steps=40),
    inits=2,
    ablations=("no_env",),
    workers=2,
)

#: toy size, seconds on a CPU: every window cut to 30 frames (prediction mode at the window's own rate), a tiny
#: network trained for one pass and two rollout steps, one initialisation, DDIM with 2 steps on one thread; it checks
#: that ours and every baseline run, not the fit
SMOKE = replace(
    QUICK,
    model=replace(
        SIZES["quick"],
        hist_hidden=8,
        hist_dim=8,
        social_hidden=8,
        social_layers=1,
        env_dim=8,
        light_dim=8,
        head_hidden=(16,),
        steps=5,
        beta_start=0.05,
        beta_end=0.6,
    ),
    train=replace(QUICK.train, epochs=1, finetune_steps=2, horizon=4, finetune_graphs=1, finetune_sample_steps=2),
    inits=1,
    threads=1,
    workers=1,
    sample_steps=2,
    replicas=1,
    sfm_frames=20,
    pred_k=2,
    pred_frame_step=1,
    speed_pedestrians=20,
    speed_steps=10,
    window_frames=30,
)


@dataclass(frozen=True)
class ForecastBench(Config):
    """Settings of the forecasting case (`forecast` protocol on UCY at 2.5 fps). `model`, `train`, `inits`, `threads`,
    `workers`, `sampler`, `sample_steps`, `sfm_frames`, `window_frames` as in `EnvSocialBench` (window_frames cut at
    the recorded rate, before resampling); `goal_lookahead`: seconds ahead of the constant-velocity goals both models
    train and forecast with; `k`, `observe`, `horizon`, `skip`: the protocol (samples, frames, sequence stride);
    `cost_pedestrians`, `cost_steps`: the per-step simulation cost on a synthetic plaza at 0.05 pedestrians / m^2.
    Training runs 40 teacher epochs: at 2.5 fps the windows hold a fifth of the recorded frames, so that is about as
    many steps as the simulation cases' 8 epochs."""

    model: EnvSocialConfig = field(default_factory=lambda: SIZES["quick"])
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=40, batch_frames=16, finetune_steps=40))
    inits: int = 2
    threads: int | None = 1
    workers: int = 2
    sampler: Literal["ddpm", "ddim"] = "ddim"
    sample_steps: int | None = 10
    sfm_frames: int = 50
    window_frames: int | None = None
    goal_lookahead: float = 8.0
    k: int = 20
    observe: int = 8
    horizon: int = 12
    skip: int = 1
    cost_pedestrians: tuple[int, ...] = (100, 1000, 10000)
    cost_steps: int = 3


FORECAST_QUICK = ForecastBench()
FORECAST_FULL = replace(
    FORECAST_QUICK, model=SIZES["full"], inits=3, train=replace(FORECAST_QUICK.train, finetune_steps=200)
)
FORECAST_SMOKE = replace(
    FORECAST_QUICK,
    model=SMOKE.model,
    train=SMOKE.train,
    inits=1,
    threads=1,
    workers=1,
    sample_steps=2,
    sfm_frames=10,
    window_frames=200,
    k=2,
    observe=3,
    horizon=4,
    skip=4,
    cost_pedestrians=(10, 100),
    cost_steps=2,
)
