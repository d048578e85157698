"""`flowlab vision cmt mid-train|post-train|evaluate`: consistency mid-training from the kit's EDM digits teacher,
post-training a consistency model from a chosen initialisation, and its 1- and 2-step quality."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowlab.core.cli import (
    OVERWRITE_HELP,
    RESUME_HELP,
    SEEDS,
    claim_run_option,
    device_option,
    json_text,
    option_error,
)
from flowlab.vision_gen.kit.cli import teacher_from_options

app = typer.Typer(help="CMT: consistency mid-training, then consistency post-training.", no_args_is_help=True)

_TEACHER_HELP = "Training steps of the kit's edm teacher (the shared cached one by default)."


def _load(student: Path, device, option: str = "--student"):
    from flowlab.vision_gen.cmt.store import load_student

    try:
        return load_student(student, device=device)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=option) from err


@app.command("mid-train")
def mid_train(
    out: Annotated[Path, typer.Option(help="Folder for the student (student.safetensors, config.json, ckpt/).")],
    steps: Annotated[int, typer.Option(help="Training steps.")] = 600,
    batch_size: Annotated[int, typer.Option(help="(state, endpoint) pairs per step: batch/nfe trajectories.")] = 128,
    nfe: Annotated[int, typer.Option(help="DPM-Solver++ steps of each teacher trajectory.")] = 16,
    solver: Annotated[str, typer.Option(help="dpmpp_3m or dpmpp_2m.")] = "dpmpp_3m",
    metric: Annotated[str, typer.Option(help="pseudo_huber, l2 (squared) or l2_norm.")] = "pseudo_huber",
    branch: Annotated[str, typer.Option(help="consistency (endpoints) or meanflow (average velocities).")] = (
        "consistency"
    ),
    lr: Annotated[float, typer.Option(help="Adam learning rate, decayed linearly to 0.")] = 5e-4,
    teacher_dim: Annotated[int, typer.Option(help="Width of the kit teacher's ClassDiT.")] = 64,
    teacher_depth: Annotated[int, typer.Option(help="Blocks of the kit teacher's ClassDiT.")] = 4,
    teacher_steps: Annotated[int, typer.Option(help=_TEACHER_HELP)] = 4000,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the trajectories' noise and labels.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Mid-train a consistency student on the edm teacher's DPM-Solver++ trajectories; --resume continues from
    OUT/ckpt with the same options, and a different run in OUT is refused a different run in OUT unless --overwrite."""
    from flowlab.vision_gen.cmt.model import MidConfig
    from flowlab.vision_gen.cmt.store import save_student
    from flowlab.vision_gen.cmt.train import mid_train as run
    from flowlab.vision_gen.kit.teachers import digits_teacher

    dev = device_option(device)
    try:
        config = MidConfig(branch=branch, steps=steps, batch_size=batch_size, nfe=nfe, solver=solver, metric=metric,
                           lr=lr, seed=seed)  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    teacher_config = teacher_from_options(dev, family="edm", dim=teacher_dim, depth=teacher_depth,
                                          steps=teacher_steps)  # fmt: skip
    spec = {"command": "vision cmt mid-train", "mid": config.to_dict(), "teacher": {**teacher_config.to_dict(),
            "device": None}}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    teacher = digits_teacher(teacher_config, device=dev)
    student = run(teacher, config, device=dev, progress=True, ckpt_dir=out / "ckpt").student
    save_student(out, student, teacher_config, {"init": "cmt", "mid": config.to_dict()})
    typer.echo(f"wrote the mid-trained student to {out}")


@app.command("post-train")
def post_train(
    out: Annotated[Path, typer.Option(help="Folder for the student and its curve.json.")],
    init: Annotated[str, typer.Option(help="random, diffusion, or a folder written by mid-train.")] = "diffusion",
    method: Annotated[str, typer.Option(help="ect (constant step), ect_doubling, cd (distillation) or meanflow.")] = (
        "ect"
    ),
    steps: Annotated[int, typer.Option(help="Training steps.")] = 400,
    batch_size: Annotated[int, typer.Option(help="Real digits per step.")] = 128,
    lr: Annotated[float, typer.Option(help="Adam learning rate (constant).")] = 2e-4,
    q: Annotated[float, typer.Option(help="ECT's q of the constant step t/q (ect, cd).")] = 4096.0,
    eval_every: Annotated[int, typer.Option(help="Measure 1- and 2-step quality every N steps (0: at the end).")] = 0,
    teacher_dim: Annotated[int, typer.Option(help="Width of the kit teacher's ClassDiT.")] = 64,
    teacher_depth: Annotated[int, typer.Option(help="Blocks of the kit teacher's ClassDiT.")] = 4,
    teacher_steps: Annotated[int, typer.Option(help=_TEACHER_HELP)] = 4000,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the data draws and (random init) the weights.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Post-train a consistency model on the digits train split from a random, diffusion or mid-trained
    initialisation; writes the student and, with --eval-every, its quality curve (curve.json)."""
    from flowlab.vision_gen.cmt.meanflow import meanflow_student
    from flowlab.vision_gen.cmt.model import PostConfig, consistency_student
    from flowlab.vision_gen.cmt.store import save_student
    from flowlab.vision_gen.cmt.train import post_train as run
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.teachers import digits_teacher

    dev = device_option(device)
    try:
        config = PostConfig(method=method, steps=steps, batch_size=batch_size, lr=lr, q=q, eval_every=eval_every,
                            seed=seed)  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    if init in ("random", "diffusion"):
        teacher_config = teacher_from_options(dev, family="edm", dim=teacher_dim, depth=teacher_depth,
                                              steps=teacher_steps)  # fmt: skip
        student, history = None, {"init": init}
    else:
        student, teacher_config, history = _load(Path(init), dev, "--init")
        if (history["kind"] == "meanflow") != (method == "meanflow"):
            raise typer.BadParameter(f"--init: {init} holds a {history['kind']} student, which --method {method} "
                                     "does not train (mid-train --branch meanflow for meanflow)")  # fmt: skip
    spec = {"command": "vision cmt post-train", "post": config.to_dict(), "init": init,
            "teacher": {**teacher_config.to_dict(), "device": None}}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    teacher = digits_teacher(teacher_config, device=dev)
    if student is None:
        make = meanflow_student if method == "meanflow" else consistency_student
        student = make(teacher, init=init, seed=seed)
    data = load_digits_images(teacher_config.size, split="train")
    measure = _measure(teacher_config.size, dev, n=500, seed=seed) if eval_every else None
    result = run(student, config, data.x, data.y, teacher=teacher, device=dev, evaluate=measure, progress=True,
                 ckpt_dir=out / "ckpt")  # fmt: skip
    save_student(out, result.student, teacher_config, {**history, "post": config.to_dict()})
    if result.curve:
        (out / "curve.json").write_text(json_text([{"step": s, **m} for s, m in result.curve], indent=1))
    typer.echo(f"wrote the {method} student ({history['init']} init) to {out}")


def _measure(size: int, device, *, n: int, seed: int):
    import torch

    from flowlab.vision_gen.cmt.evaluate import few_step_quality

    labels = (torch.arange(n) % 10).to(device)
    noise = torch.randn(n, 1, size, size, generator=torch.Generator().manual_seed(seed)).to(device)
    return lambda student, step: few_step_quality(student, labels, noise, seed=seed)


@app.command()
def evaluate(
    student: Annotated[Path, typer.Option(help="A folder written by mid-train or post-train.")],
    n: Annotated[int, typer.Option(help="Samples per step count (labels 0-9 in turn).")] = 1000,
    grid: Annotated[Path | None, typer.Option(help="Also save 1- and 2-step samples as a PNG grid here.")] = None,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """1- and 2-step digits-FD (beside its real-vs-real floor) and class accuracy of a student, as JSON lines."""
    import torch

    from flowlab.vision_gen.cmt.evaluate import few_step_quality, few_step_samples
    from flowlab.vision_gen.kit.quality import save_image_grid

    dev = device_option(device)
    if n < 2:
        raise typer.BadParameter(f"--n: expected at least 2 samples, got {n}")
    if grid is not None and grid.suffix.lower() != ".png":
        raise typer.BadParameter(f"--grid: expected a .png path, got {grid}")
    model, teacher_config, history = _load(student, dev)
    size = teacher_config.size
    labels = (torch.arange(n) % 10).to(dev)
    noise = torch.randn(n, 1, size, size, generator=torch.Generator().manual_seed(seed)).to(dev)
    row = few_step_quality(model, labels, noise, seed=seed)
    for k in (1, 2):
        typer.echo(json_text({"init": history.get("init"), "steps": k, "fd": row[f"fd_{k}step"],
                               "fd_floor": row["fd_floor"], "accuracy": row[f"acc_{k}step"]}))  # fmt: skip
    if grid is not None:
        grid.parent.mkdir(parents=True, exist_ok=True)
        g = torch.Generator().manual_seed(seed)
        rows = [few_step_samples(model, labels[:20], steps=k, noise=noise[:20], generator=g).cpu() for k in (1, 2)]
        save_image_grid(grid, torch.cat(rows))
        typer.echo(f"wrote 1-step (top) and 2-step (bottom) samples to {grid}")
