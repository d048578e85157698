"""Cross-mode distillation into a few-step student (DMD2-style, on the core `fit`), from the pre-trained dual-mode
model, whose frozen MV mode is the teacher ("real" score):

- mode "3d" (FlashWorld): the student samples in 3D mode (`sample_3d`, `nfe` steps); each update draws a step k,
  simulates the student's own sampler to x_{t_k} without gradients (backward simulation), and renders its Gaussians
  at (x_{t_k}, t_k): x~. Generator loss: the core's `dmd_loss(x~, teacher, fake)` plus the cross-mode consistency
  loss `cmc_weight` ||x~ - sg(x0_MV)||^2 against the student's own MV prediction of the same pass.
- mode "mv" (the MV-Dist baseline): the same with the student's MV data prediction as x~ and no 3D mode or CMC.

The fake score is a copy of the pre-trained MV mode trained online by the core's `fake_score_loss` on the student's
detached outputs; student and fake are trained by one optimizer (the losses reach disjoint parameters), the fake at
the larger learning rate `fake_lr` (two time scales)."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.losses import dmd_loss, fake_score_loss
from flowlab.vision_gen.flashworld.model import DualModeModel, MVField
from flowlab.vision_gen.flashworld.names import DISTILL_MODES
from flowlab.vision_gen.flashworld.sample import sample_3d, sample_mv
from flowlab.vision_gen.kit.train import fit_with_ema

__all__ = ["DistillConfig", "distill_cross_mode", "distill_loss"]


@dataclass(frozen=True)
class DistillConfig(Config):
    """`mode` 3d (FlashWorld) or mv (MV-Dist); an `nfe`-step student on the grid of `shift`; `steps` updates of
    `batch_size` conditioning views at `lr` (student) and `fake_lr` (fake score); `cmc_weight` (3d only; 0: the
    -CMC ablation); DMD's re-noising window [s_min, s_max]; `seed`."""

    mode: str = "3d"
    nfe: int = 4
    shift: float = 3.0
    steps: int = 80
    batch_size: int = 8
    lr: float = 3e-4
    fake_lr: float = 1e-3
    cmc_weight: float = 0.1
    s_min: float = 0.02
    s_max: float = 0.98
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in DISTILL_MODES:
            raise ValueError(f"mode: expected one of {DISTILL_MODES}, got {self.mode!r}")
        if min(self.nfe, self.steps, self.batch_size) < 1:
            raise ValueError(f"nfe, steps, batch_size: expected >= 1, got {self.nfe}, {self.steps}, {self.batch_size}")
        if not (self.lr > 0 and self.fake_lr > 0 and self.cmc_weight >= 0 and self.shift > 0):
            raise ValueError("lr, fake_lr, cmc_weight, shift: expected positive numbers (cmc_weight >= 0)")


def distill_loss(
    student: DualModeModel,
    fake: DualModeModel,
    teacher: DualModeModel,
    image: torch.Tensor,
    noise: torch.Tensor,
    config: DistillConfig,
    *,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One update's loss on conditioning images (B, 3, S, S) from noise (B, V, 3, S, S): generator (DMD [+ CMC])
    plus fake-score loss; logs "dmd", "cmc", "fake"."""
    b = len(noise)
    with torch.no_grad():
        if config.mode == "3d":
            sim = sample_3d(student, image, noise, steps=config.nfe, shift=config.shift, generator=generator)
        else:
            sim = sample_mv(student, image, noise, steps=config.nfe, shift=config.shift)
        k = torch.randint(config.nfe, (b,), generator=generator, device=generator.device).to(noise.device)
        x_k, t_k = sim.states[k, torch.arange(b, device=noise.device)], sim.times[k]
    out = student(x_k, t_k, image)
    gaussians, x0_mv = student.decode(x_k, t_k, out)
    if config.mode == "3d":
        x = 2 * student.render(gaussians, student.cameras) - 1
        cmc = (x - x0_mv.detach()).square().mean()
    else:
        x, cmc = x0_mv, torch.zeros((), device=noise.device)
    dmd = dmd_loss(x, MVField(teacher), MVField(fake), s_min=config.s_min, s_max=config.s_max, generator=generator,
                   image=image)  # fmt: skip
    fake_loss = fake_score_loss(MVField(fake), x, generator=generator, image=image)
    loss = dmd + config.cmc_weight * cmc + fake_loss
    return loss, {"dmd": dmd.detach(), "cmc": cmc.detach(), "fake": fake_loss.detach()}


def distill_cross_mode(
    teacher: DualModeModel,
    images: torch.Tensor,
    config: DistillConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> DualModeModel:
    """The few-step student (eval mode) distilled from `teacher` on conditioning views images (N, 3, S, S) in
    [-1, 1] (the train split's view 0)."""
    s = teacher.config.rig.size
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or tuple(images.shape[1:]) != (3, s, s):
        raise ValueError(f"images: expected (N, 3, {s}, {s}), got {getattr(images, 'shape', images)}")
    teacher = copy.deepcopy(teacher).to(device).eval().requires_grad_(False)
    pair = nn.ModuleDict({"student": copy.deepcopy(teacher), "fake": copy.deepcopy(teacher)}).requires_grad_(True)
    pair.train()
    data = images.to(device)
    shape = (teacher.config.rig.views, 3, s, s)

    def batches(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        idx = torch.randint(len(data), (config.batch_size,), generator=generator, device=generator.device)
        noise = torch.randn(config.batch_size, *shape, generator=generator, device=generator.device)
        return {"image": data[idx.to(data.device)], "noise": noise.to(data.device)}

    def loss_fn(net, batch, generator):
        return distill_loss(net["student"], net["fake"], teacher, batch["image"], batch["noise"], config,
                            generator=generator)  # fmt: skip

    groups = [{"params": pair["student"].parameters(), "lr": config.lr},
              {"params": pair["fake"].parameters(), "lr": config.fake_lr}]  # fmt: skip
    fit_with_ema(pair, loss_fn, batches, steps=config.steps, param_groups=groups, lr=config.lr, ema_decay=None,
                 schedule="warmup_cosine", device=device, generator=torch.Generator().manual_seed(config.seed),
                 progress=progress, ckpt_dir=ckpt_dir)  # fmt: skip
    return pair["student"].eval()
