"""Training a GFM (or the RFM baseline) with `flowlab.core.train.fit`: Adam, cosine LR decay, EMA, checkpoints."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.config import Config
from flowlab.core.flowmaps import AnchoredFlowMap, ParametrisedFlowMap
from flowlab.core.gfm.model import build_flow_map
from flowlab.core.gfm.objective import OBJECTIVES, TEACHER_OBJECTIVES, gfm_loss
from flowlab.core.losses.flow_map import LSD_DERIVATIVES
from flowlab.core.manifolds.base import Manifold
from flowlab.core.nets import seeded_init
from flowlab.core.train import EMA, fit
from flowlab.core.validation import check_choice

__all__ = ["DISTILL", "GFMConfig", "TrainedGFM", "flow_map_for", "scheduled_lr", "train_gfm"]

#: where the self-distillation target comes from (`GFMConfig.distill`)
DISTILL = ("self", "teacher", "anchored")


@dataclass(frozen=True)
class GFMConfig(Config):
    """Model and training options (defaults ours: the paper's sizes are unverified).

    objective: lsd | esd | psd | mf | rfm. hidden: MLP widths; time_embed_dim / time_scale: the sinusoidal
    embedding of s and t; fourier_dim / fourier_scale: random Fourier features of x (0: none; `ManifoldMLP`).
    lr decays along a cosine to lr_min. diag_fraction, sd_weight, max_gap, source_fraction, esd_stopgrad,
    lsd_derivative, t_max: see `gfm_loss`. distill: "self" (the map's own diagonal is the self-distillation target,
    the paper) | "teacher" (a pretrained field passed to `train_gfm(teacher=...)` is, and the diagonal rows regress
    onto it; lsd, esd) | "anchored" (the map is an `AnchoredFlowMap` on that teacher, X_{s,t} = exp_x((t − s)(v_T(x,
    s) + (t − s) g)), so its diagonal is the teacher's and every row trains the jump; lsd, esd; diag_fraction None
    or 0).
    """

    objective: str = "lsd"
    steps: int = 20_000
    batch_size: int = 512
    hidden: tuple[int, ...] = (256, 256, 256, 256)
    time_embed_dim: int = 32
    time_scale: float = 100.0
    fourier_dim: int = 0
    fourier_scale: float = 1.0
    lr: float = 1e-3
    lr_min: float = 1e-5
    ema_decay: float = 0.999
    grad_clip: float = 1.0
    diag_fraction: float | None = None  # None: the objective's default, `objective.DEFAULT_DIAG_FRACTION`
    sd_weight: float = 1.0
    max_gap: float | None = None
    source_fraction: float = 0.0  # the share of self-distillation pairs that start at s = 0 (issue 39: T⁷)
    esd_stopgrad: str = "none"  # the spec's "pushforward" diverged on volcano and T² (README)
    lsd_derivative: str = "jvp"
    t_max: float = 1.0 - 1e-3
    distill: str = "self"

    def __post_init__(self) -> None:
        if isinstance(self.hidden, list):
            object.__setattr__(self, "hidden", tuple(self.hidden))
        super().__post_init__()
        check_choice(self.objective, OBJECTIVES, "objective")
        check_choice(self.lsd_derivative, LSD_DERIVATIVES, "lsd_derivative")
        check_choice(self.distill, DISTILL, "distill")
        if self.distill != "self" and self.objective not in TEACHER_OBJECTIVES:
            raise ValueError(
                f"distill: {self.distill!r} is for the objectives {TEACHER_OBJECTIVES}, not {self.objective!r}"
            )
        if self.distill == "anchored" and self.diag_fraction not in (None, 0):
            raise ValueError(
                f"diag_fraction: an anchored map's diagonal is the teacher's, so it takes no diagonal rows "
                f"(None or 0), got {self.diag_fraction!r}"
            )
        if self.fourier_dim < 0:
            raise ValueError(f"fourier_dim: expected an int >= 0, got {self.fourier_dim!r}")
        for name in ("steps", "batch_size", "time_embed_dim"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if not self.hidden or not all(h > 0 for h in self.hidden):
            raise ValueError(f"hidden: expected positive int widths, got {self.hidden!r}")
        for name in ("lr", "time_scale", "grad_clip", "sd_weight", "fourier_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: expected a positive number, got {value!r}")
        if not 0 <= self.source_fraction <= 1:
            raise ValueError(f"source_fraction: expected a value in [0, 1], got {self.source_fraction!r}")
        if not 0 <= self.lr_min <= self.lr:
            raise ValueError(f"lr_min: expected 0 <= lr_min <= lr, got {self.lr_min!r}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: expected a value in [0, 1), got {self.ema_decay!r}")


def scheduled_lr(config: GFMConfig, step: int) -> float:
    """The learning rate `train_gfm`'s cosine schedule has reached after `step` of `config.steps` steps."""
    if not 0 <= step <= config.steps:
        raise ValueError(f"step: expected 0 <= step <= {config.steps}, got {step!r}")
    return config.lr_min + (config.lr - config.lr_min) * (1 + math.cos(math.pi * step / config.steps)) / 2


def zero_head(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy of a `build_flow_map` model's state dict with its output layer (`net.mlp.out`) set to zero: the
    hidden features of a trained velocity net, as the start of an `AnchoredFlowMap`'s correction (which is then 0)."""
    head = [k for k in state if k.startswith("net.mlp.out.")]
    if not head:
        raise ValueError(f"state: expected a build_flow_map state dict with net.mlp.out, got keys {list(state)[:4]}")
    return {k: torch.zeros_like(v) if k in head else v.clone() for k, v in state.items()}


def flow_map_for(manifold: Manifold, config: GFMConfig, *, teacher: Any = None) -> ParametrisedFlowMap:
    """A freshly initialised flow map with `config`'s architecture (for training, or to load saved weights into);
    with config.distill = "anchored", an `AnchoredFlowMap` whose correction network has that architecture, on the
    frozen field `teacher(x=, t=)` (required then, refused otherwise)."""
    if (config.distill == "anchored") != (teacher is not None):
        raise ValueError(
            f"teacher: config.distill is {config.distill!r}, so flow_map_for "
            f"{'needs the teacher field' if config.distill == 'anchored' else 'takes no teacher'}"
        )
    flow_map = build_flow_map(
        manifold, hidden=config.hidden, time_embed_dim=config.time_embed_dim, time_scale=config.time_scale,
        fourier_dim=config.fourier_dim, fourier_scale=config.fourier_scale,
    )  # fmt: skip
    return flow_map if teacher is None else AnchoredFlowMap(flow_map.net, teacher, manifold=manifold)


@dataclass(frozen=True)
class TrainedGFM:
    """flow_map: the trained model holding the EMA weights; history: fit's log rows; samples_seen."""

    flow_map: ParametrisedFlowMap
    history: tuple[dict[str, float], ...]
    samples_seen: int


def train_gfm(
    manifold: Manifold,
    data: torch.Tensor,
    config: GFMConfig,
    *,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    ckpt_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
    log_every: int = 100,
    callbacks: tuple = (),
    init: Mapping[str, torch.Tensor] | None = None,
    teacher: Any = None,
) -> TrainedGFM:
    """Train on `data`: (N, ambient_dim) points on `manifold` with source draws from `manifold.random_base`.

    The initial weights (one draw) and every step's batch (with replacement), source points and times come from
    `generator` (CPU), so a run is reproducible from its seed whatever else uses torch's global RNG. `init`: a
    state dict to start from (e.g. an RFM model's weights: a warm start); `callbacks` go to `fit`. `teacher`: with
    config.distill = "teacher" or "anchored", the frozen field `teacher(x=, t=)` on `device` (e.g. a trained RFM model's
    `diagonal_field`), called without gradients. Returns the model with its EMA weights loaded.
    """
    if not isinstance(config, GFMConfig):
        raise ValueError(f"config: expected a GFMConfig, got {type(config).__name__}")
    if (config.distill != "self") != (teacher is not None):
        raise ValueError(
            f"teacher: config.distill is {config.distill!r}, so a teacher field is "
            f"{'not used' if config.distill == 'self' else 'required'}; got {type(teacher).__name__}"
        )
    manifold.check_point(data, "data")
    device = torch.device(device)
    data_cpu = data.detach().to("cpu", torch.float32)
    with seeded_init(generator):  # the initial weights come from `generator`, not from torch's global RNG
        flow_map = flow_map_for(manifold, config, teacher=teacher if config.distill == "anchored" else None)
    if init is not None:
        flow_map.load_state_dict(init)
    flow_map.to(device)
    optimizer = torch.optim.Adam(flow_map.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.steps, eta_min=config.lr_min)
    ema = EMA(flow_map, decay=config.ema_decay, warmup_steps=min(100, config.steps // 10))

    def batches(step: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(len(data_cpu), (config.batch_size,), generator=gen)
        return manifold.random_base(config.batch_size, generator=gen), data_cpu[idx]

    def loss_fn(model, batch, gen):
        x_0, x_1 = batch
        out = gfm_loss(
            model,
            x_0,
            x_1,
            objective=config.objective,
            manifold=manifold,
            generator=gen,
            diag_fraction=0.0 if config.distill == "anchored" else config.diag_fraction,
            sd_weight=config.sd_weight,
            t_max=config.t_max,
            max_gap=config.max_gap,
            source_fraction=config.source_fraction,
            esd_stopgrad=config.esd_stopgrad,
            lsd_derivative=config.lsd_derivative,
            teacher=teacher,
        )
        return out.loss, out.logs

    result = fit(
        flow_map,
        loss_fn,
        batches,
        steps=config.steps,
        optimizer=optimizer,
        lr_schedule=schedule,
        ema=ema,
        grad_clip=config.grad_clip,
        ckpt_dir=ckpt_dir,
        ckpt_every=max(config.steps, 1),
        device=device,
        generator=generator,
        progress=progress,
        log_every=log_every,
        callbacks=callbacks,
        model_kwargs={"manifold": repr(manifold), **config.to_dict()},
        config=config.to_dict(),
    )
    with torch.no_grad():
        for name, p in flow_map.state_dict().items():
            p.copy_(ema.shadow[name])
    flow_map.eval()
    return TrainedGFM(flow_map=flow_map, history=result.history, samples_seen=result.samples_seen)
