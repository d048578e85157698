"""Distilling a student on the core `fit` (the kit's recipe: Adam, one-cycle, EMA, checkpoint/resume): pi-ID for
the pi-Flow methods, endpoint regression and DMD-lite for the baselines."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import torch

from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.teachers import DigitsTeacher
from flowlab.vision_gen.kit.train import fit_with_ema
from flowlab.vision_gen.pi_flow.model import PiFlowConfig, Student, digits_student
from flowlab.vision_gen.pi_flow.objective import (
    DMDPair,
    dmd_lite_loss,
    pi_id_loss,
    teacher_ratio,
    x0_regression_loss,
)

__all__ = ["Batches", "distill", "distill_digits", "resampling_batches"]

#: batches(step, generator) -> (x_1: (B, ...) real data, cond: the teacher's and student's keywords, e.g. {"y": y})
Batches = Callable[[int, torch.Generator], tuple[torch.Tensor, dict[str, Any]]]


def resampling_batches(x_1: torch.Tensor, batch_size: int, **cond: torch.Tensor) -> Batches:
    """Batches of `batch_size` rows drawn with replacement from x_1: (N, ...), with the same rows of each
    condition (N, ...), on x_1's device."""

    def batches(step: int, g: torch.Generator):
        idx = torch.randint(0, x_1.shape[0], (batch_size,), generator=g).to(x_1.device)
        return x_1[idx], {k: v[idx] for k, v in cond.items()}

    return batches


def distill(
    config: PiFlowConfig,
    student: Student,
    teacher: Any,
    batches: Batches,
    *,
    fake: torch.nn.Module | None = None,
    device: torch.device | str,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> Student:
    """Train `student` by config.method against the velocity field `teacher(x=, t=, **cond)` (frozen) on real data
    from `batches`; DMD-lite also trains a copy of `fake`, the fake-score velocity field (the teacher's network, to
    start where the teacher is). Returns the student with its EMA weights, eval mode."""
    student = student.to(device)
    model: torch.nn.Module = student
    if config.method == "dmd_lite":
        if fake is None:
            raise ValueError("fake: DMD-lite needs a fake-score field to train (e.g. the teacher's network)")
        model = DMDPair(student, copy.deepcopy(fake).requires_grad_(True).to(device))

    current = {"step": 0}  # the step of the batch being trained on (fit draws a batch, then takes its loss)

    def with_step(step: int, g: torch.Generator):
        current["step"] = step
        x_1, cond = batches(step, g)
        return x_1.to(device), {k: v.to(device) for k, v in cond.items()}

    def loss(net, batch, g: torch.Generator):
        x_1, cond = batch
        if config.method == "dmd_lite":
            return dmd_lite_loss(net, teacher, x_1, config, generator=g, **cond), {}
        if config.method == "x0_regression":
            return x0_regression_loss(net, teacher, x_1, config, generator=g, **cond), {}
        ratio = teacher_ratio(current["step"], config.mix_iters)
        return pi_id_loss(net, teacher, x_1, config, ratio=ratio, generator=g, **cond), {}

    generator = torch.Generator().manual_seed(config.seed)
    fit_with_ema(model, loss, with_step, steps=config.steps, lr=config.lr, ema_decay=config.ema_decay, device=device,
                 generator=generator, progress=progress, ckpt_dir=ckpt_dir)  # fmt: skip
    return student.eval().requires_grad_(False)


def distill_digits(
    config: PiFlowConfig,
    teacher: DigitsTeacher,
    *,
    device: torch.device | str,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> Student:
    """`distill` of a `digits_student` of `config` from a kit rf teacher (guided by config.guidance) on the kit's
    digits train split at the teacher's size; DMD-lite's fake score starts as the teacher's network."""
    data = load_digits_images(teacher.config.size, split="train")
    batches = resampling_batches(data.x.to(device), config.batch_size, y=data.y.to(device))
    fake = teacher.net if config.method == "dmd_lite" else None
    return distill(config, digits_student(config, teacher), teacher.velocity(config.guidance), batches, fake=fake,
                   device=device, progress=progress, ckpt_dir=ckpt_dir)  # fmt: skip
