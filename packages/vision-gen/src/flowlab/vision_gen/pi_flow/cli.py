"""`flowlab vision piflow distill|sample|evaluate`: distil a pi-Flow student (or a baseline) from the kit's
rectified-flow digits teacher, sample it as a PNG grid, measure it against the teacher."""

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
    positive_ints_option,
)
from flowlab.vision_gen.kit.cli import teacher_from_options

app = typer.Typer(help="pi-Flow: few-step policy students distilled by imitation.", no_args_is_help=True)


def _positive(value: int, name: str) -> int:
    if value < 1:
        raise typer.BadParameter(f"{name}: expected a positive integer, got {value}")
    return value


def _load(student: Path, device):
    from flowlab.vision_gen.pi_flow.store import load_student

    try:
        return load_student(student, device=device)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--student") from err


@app.command()
def distill(
    out: Annotated[Path, typer.Option(help="Folder for the student (student.safetensors, config.json, ckpt/).")],
    method: Annotated[str, typer.Option(help="piflow_gm, piflow_dx, x0_regression or dmd_lite.")] = "piflow_gm",
    steps: Annotated[int, typer.Option(help="Training steps.")] = 2000,
    nfe: Annotated[str, typer.Option(help="The NFE grids to train for, e.g. 1,2,4.")] = "1,2,4",
    components: Annotated[int, typer.Option(help="K of the GM head.")] = 8,
    guidance: Annotated[float, typer.Option(help="The teacher's classifier-free guidance.")] = 1.0,
    size: Annotated[int, typer.Option(help="Digits size of the kit teacher (8, 16 or 32).")] = 8,
    teacher_dim: Annotated[int, typer.Option(help="Width of the kit teacher's ClassDiT.")] = 64,
    teacher_depth: Annotated[int, typer.Option(help="Blocks of the kit teacher's ClassDiT.")] = 4,
    teacher_steps: Annotated[int, typer.Option(help="Training steps of the kit teacher.")] = 4000,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the student's initialisation and training draws.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Distil a student from the kit's rf digits teacher (the shared one by default, built into the cache on first
    use); --resume continues from OUT/ckpt with the same options; a different run in OUT is refused unless
    --overwrite."""
    from flowlab.vision_gen.kit.teachers import digits_teacher
    from flowlab.vision_gen.pi_flow.model import PiFlowConfig
    from flowlab.vision_gen.pi_flow.store import save_student
    from flowlab.vision_gen.pi_flow.train import distill_digits

    dev = device_option(device)
    nfes = positive_ints_option(nfe, "--nfe")
    try:
        config = PiFlowConfig(method=method, steps=steps, nfe=nfes, components=components, guidance=guidance,
                              seed=seed)  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    teacher_config = teacher_from_options(dev, family="rf", size=size, dim=teacher_dim, depth=teacher_depth,
                                          steps=teacher_steps)  # fmt: skip
    spec = {"command": "vision piflow distill", "pi_flow": config.to_dict(),
            "teacher": {**teacher_config.to_dict(), "device": None}}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    teacher = digits_teacher(teacher_config, device=dev)
    student = distill_digits(config, teacher, device=dev, progress=True, ckpt_dir=out / "ckpt")
    save_student(out, student, config, teacher_config)
    typer.echo(f"wrote {method} student to {out}")


@app.command()
def sample(
    student: Annotated[Path, typer.Option(help="A folder written by `distill`.")],
    out: Annotated[Path, typer.Option(help="Output PNG grid (samples beside it as .pt).")],
    nfe: Annotated[int, typer.Option(help="Network calls.")] = 2,
    n: Annotated[int, typer.Option(help="Number of samples (labels 0-9 in turn).")] = 100,
    temperature: Annotated[float, typer.Option(help="GM temperature on every step but the last.")] = 1.0,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the initial noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Class-conditional samples of a student in NFE network calls."""
    import torch

    from flowlab.vision_gen.kit.quality import save_image_grid
    from flowlab.vision_gen.pi_flow.sample import sample_piflow

    dev = device_option(device)
    _positive(nfe, "--nfe")
    _positive(n, "--n")
    if out.suffix.lower() != ".png":
        raise typer.BadParameter(f"--out: expected a .png path, got {out}")
    model, config, teacher = _load(student, dev)
    noise = torch.randn(n, 1, teacher.size, teacher.size, generator=torch.Generator().manual_seed(seed)).to(dev)
    try:
        x = sample_piflow(model, noise, nfe=nfe, temperature=temperature, substeps_per_unit=config.substeps_per_unit,
                          y=(torch.arange(n) % 10).to(dev)).clamp(-1, 1).cpu()  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    out.parent.mkdir(parents=True, exist_ok=True)
    save_image_grid(out, x)
    torch.save(x, out.with_suffix(".pt"))
    typer.echo(f"wrote {n} samples ({nfe} NFE) to {out}")


@app.command()
def evaluate(
    student: Annotated[Path, typer.Option(help="A folder written by `distill`.")],
    nfe: Annotated[str, typer.Option(help="NFEs to measure, e.g. 1,2,4.")] = "1,2,4",
    n: Annotated[int, typer.Option(help="Samples per NFE (labels 0-9 in turn).")] = 1000,
    teacher_steps: Annotated[int, typer.Option(help="Euler steps of the reference teacher samples.")] = 50,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Quality, diversity and teacher alignment of a student at each NFE, as JSON lines."""
    import torch

    from flowlab.vision_gen.kit.teachers import digits_teacher
    from flowlab.vision_gen.pi_flow.evaluate import digits_measures
    from flowlab.vision_gen.pi_flow.sample import sample_piflow

    dev = device_option(device)
    nfes = positive_ints_option(nfe, "--nfe")
    _positive(n, "--n")
    _positive(teacher_steps, "--teacher-steps")
    model, config, teacher_config = _load(student, dev)
    teacher = digits_teacher(teacher_config, device=dev)
    size = teacher_config.size
    noise = torch.randn(n, 1, size, size, generator=torch.Generator().manual_seed(seed)).to(dev)
    y = (torch.arange(n) % 10).to(dev)
    reference = teacher.sample(y, steps=teacher_steps, sampler="euler", guidance=config.guidance, noise=noise).cpu()
    for k in nfes:
        x = sample_piflow(model, noise, nfe=k, substeps_per_unit=config.substeps_per_unit, y=y).cpu()
        row = digits_measures(x, y.cpu(), reference, repeats=3, seed=seed)
        typer.echo(json_text({"method": config.method, "nfe": k, **row}))
