"""Mid-training and post-training on the core `fit` (Adam, EMA, checkpoint/resume, progress, DDP under torchrun).

student = mid_train(teacher, MidConfig(), device="cpu")                            # CMT
result = post_train(student, PostConfig(method="ect"), images, labels, device="cpu", evaluate=measure)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from flowlab.core.nets import ECMPreconditioner
from flowlab.core.train import EMA, fit, latest_checkpoint
from flowlab.core.train.loop import StepInfo
from flowlab.vision_gen.cmt.meanflow import MeanFlowStudent, cmt_meanflow_loss, meanflow_post_loss, meanflow_student
from flowlab.vision_gen.cmt.model import MidConfig, PostConfig, consistency_student
from flowlab.vision_gen.cmt.objective import cmt_loss, post_loss
from flowlab.vision_gen.kit.teachers import DigitsTeacher

__all__ = ["Evaluate", "Student", "TrainResult", "mid_train", "post_train"]

#: a consistency student (`ECMPreconditioner`) or a MeanFlow one
Student = ECMPreconditioner | MeanFlowStudent
#: evaluate(student (EMA weights, training mode), step) -> scalar measures, called every eval_every steps
Evaluate = Callable[[Student, int], dict[str, float]]


@dataclass
class TrainResult:
    """student: the trained student (EMA weights, training mode); curve: (step, measures) at step 0 and every
    eval_every steps, the last at the final step (empty without an evaluate function)."""

    student: Student
    curve: list[tuple[int, dict[str, float]]] = field(default_factory=list)


def _measuring(
    result: TrainResult, evaluate: Evaluate | None, every: int, steps: int, ckpt_dir: str | os.PathLike[str] | None
) -> tuple:
    """The `fit` callbacks that append evaluate(EMA weights, step) to result.curve: now (step 0), every `every`
    steps and at the last step; none without `evaluate`. With `ckpt_dir` the curve is kept there too (curve.json,
    rewritten at each point): a run resuming from a checkpoint takes up the points measured up to it."""
    if evaluate is None:
        return ()
    saved = None if ckpt_dir is None else Path(ckpt_dir) / "curve.json"
    last = None if ckpt_dir is None else latest_checkpoint(ckpt_dir)
    if last is not None and saved.is_file():
        done = int(last.name.removeprefix("step-"))
        result.curve.extend((step, row) for step, row in json.loads(saved.read_text()) if step <= done)
    else:
        result.curve.append((0, evaluate(result.student, 0)))

    def measure(info: StepInfo) -> None:
        if info.is_main and ((every and info.step % every == 0) or info.step == steps):
            with info.ema.swap() as averaged:
                result.curve.append((info.step, evaluate(averaged, info.step)))
            if saved is not None:
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(result.curve))

    return (measure,)


def _optimiser(model: torch.nn.Module, lr: float, steps: int, decay: bool):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: max(0.0, 1 - i / steps)) if decay else None
    return opt, sched


def mid_train(
    teacher: DigitsTeacher,
    config: MidConfig,
    *,
    device: torch.device | str,
    evaluate: Evaluate | None = None,
    eval_every: int = 0,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> TrainResult:
    """Consistency mid-training from the diffusion teacher's weights: each step draws batch_size / nfe trajectories
    of the frozen edm `teacher` (uniform random labels) and regresses every state onto its endpoint (`cmt_loss`;
    branch "meanflow": a MeanFlow student onto average velocities, `cmt_meanflow_loss`); lr decayed linearly to 0.
    Returns the student (EMA weights, training mode) and, with `evaluate`, its curve (step 0, every `eval_every`
    steps, the last step)."""
    device = torch.device(device)
    teacher = teacher.to(device)
    if config.branch == "meanflow":
        student: Student = meanflow_student(teacher, init="cmt", seed=config.seed).to(device)
    else:
        student = consistency_student(teacher, init="cmt", sigma_min=config.sigma_min).to(device)
    denoiser = teacher.denoiser()
    size, b = teacher.config.size, config.batch_size // config.nfe

    def batches(step: int, g: torch.Generator) -> dict[str, torch.Tensor]:
        noise = torch.randn((b, 1, size, size), generator=g).to(device)
        return {"noise": noise, "y": torch.randint(0, 10, (b,), generator=g).to(device)}

    def loss(model, batch, g):
        if config.branch == "meanflow":
            return cmt_meanflow_loss(model, denoiser, batch["noise"], nfe=config.nfe, solver=config.solver,
                                     metric=config.metric, generator=g, y=batch["y"]), {}  # fmt: skip
        return cmt_loss(model, denoiser, batch["noise"], config, y=batch["y"]), {}

    result = TrainResult(student)
    opt, sched = _optimiser(student, config.lr, config.steps, decay=True)
    ema = EMA(student, decay=config.ema_decay)
    fit(student, loss, batches, steps=config.steps, optimizer=opt, lr_schedule=sched, ema=ema, device=device,
        generator=torch.Generator().manual_seed(config.seed), progress=progress, log_every=max(1, config.steps // 10),
        ckpt_dir=ckpt_dir, ckpt_every=max(1, config.steps // 4), config={"cmt_mid": config.to_dict()},
        callbacks=_measuring(result, evaluate, eval_every, config.steps, ckpt_dir))  # fmt: skip
    ema.copy_to_model()
    return result


def post_train(
    student: Student,
    config: PostConfig,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    teacher: DigitsTeacher | None = None,
    device: torch.device | str,
    evaluate: Evaluate | None = None,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> TrainResult:
    """Post-train `student` (trained in place) by config.method on real images (N, 1, S, S) with labels (N,) (the
    edm `teacher` for "cd"; a `MeanFlowStudent` for "meanflow", an `ECMPreconditioner` otherwise); `evaluate`
    measures the EMA weights at step 0, every eval_every steps and at the end."""
    if images.dim() != 4 or labels.shape != (images.shape[0],):
        raise ValueError(f"images, labels: expected (N, 1, S, S) and (N,), got {tuple(images.shape)}, "
                         f"{tuple(labels.shape)}")  # fmt: skip
    if (config.method == "meanflow") != isinstance(student, MeanFlowStudent):
        raise ValueError(f"student: method {config.method!r} needs a "
                         f"{'MeanFlowStudent' if config.method == 'meanflow' else 'consistency student'}")  # fmt: skip
    device = torch.device(device)
    student = student.to(device).train()
    data, targets = images.to(device), labels.to(device)
    denoiser = None if teacher is None else teacher.to(device).denoiser()
    result = TrainResult(student)
    current = {"step": 0}  # the step of the batch being trained on (fit draws a batch, then takes its loss)

    def batches(step: int, g: torch.Generator) -> dict[str, torch.Tensor]:
        current["step"] = step
        idx = torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(device)
        return {"x": data[idx], "y": targets[idx]}

    def loss(model, batch, g):
        if config.method == "meanflow":
            return meanflow_post_loss(model, batch["x"], config, generator=g, y=batch["y"]), {}
        return post_loss(model, batch["x"], config, step=current["step"], teacher=denoiser, generator=g,
                         y=batch["y"]), {}  # fmt: skip

    opt, _ = _optimiser(student, config.lr, config.steps, decay=False)
    ema = EMA(student, decay=config.ema_decay)
    fit(student, loss, batches, steps=config.steps, optimizer=opt, ema=ema, device=device,
        generator=torch.Generator().manual_seed(config.seed), progress=progress,
        callbacks=_measuring(result, evaluate, config.eval_every, config.steps, ckpt_dir),
        log_every=max(1, config.steps // 10), ckpt_dir=ckpt_dir, ckpt_every=max(1, config.steps // 4),
        config={"cmt_post": config.to_dict()})  # fmt: skip
    ema.copy_to_model()
    return result
