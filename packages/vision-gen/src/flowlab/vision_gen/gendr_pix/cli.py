"""`flowlab vision sr train-teacher|distill|evaluate` (GenDR-Pix: the latent teacher, its two-stage distillation into
a VAE-free pixel student, their quality on held-out photo crops) and `flowlab vision upscale IMAGE` (a PNG or JPEG of
any size through a trained student)."""

from __future__ import annotations

import math
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

app = typer.Typer(help="GenDR-Pix: one-step super-resolution without a VAE.", no_args_is_help=True)

_IMAGES = (".png", ".jpg", ".jpeg")


def _config(**fields):
    from flowlab.vision_gen.gendr_pix.model import GenDRConfig

    try:
        return GenDRConfig(**fields)
    except ValueError as err:
        raise option_error(err, {"teacher_steps": "--steps"}) from err


def _cfg_weight(value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"expected a finite omega >= 0, got {value}", param_hint="--cfg-weight")
    return value


def _load(folder: Path, name: str, device, hint: str = "--model"):
    from flowlab.vision_gen.gendr_pix.store import load_sr

    try:
        return load_sr(folder, name, device=device)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=hint) from err


def _pairs(config, *, split: str = "train", size: int | None = None, n: int | None = None, seed: int = 0):
    from flowlab.vision_gen.gendr_pix.data import sr_pairs

    return sr_pairs(split, size or config.crop, n or config.pairs, config.degradation, seed=seed)


@app.command("train-teacher")
def train_teacher(
    out: Annotated[Path, typer.Option(help="Folder for the teacher (teacher.safetensors, config.json, ckpt/).")],
    steps: Annotated[int, typer.Option(help="Training steps.")] = 600,
    pairs: Annotated[int, typer.Option(help="HR crops of the train photos in the pool.")] = 4096,
    crop: Annotated[int, typer.Option(help="HR crop side (a multiple of scale x shuffle factor).")] = 32,
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = 1e-3,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the crops, degradations and training.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train the latent x4 teacher (the GenDR stand-in) on the kit's photo autoencoder (built into the cache on
    first use); --resume continues from OUT/ckpt with the same options."""
    from flowlab.vision_gen.gendr_pix.store import save_sr
    from flowlab.vision_gen.gendr_pix.train import train_teacher as run
    from flowlab.vision_gen.kit.autoencoder import tiny_autoencoder

    dev = device_option(device)
    config = _config(teacher_steps=steps, pairs=pairs, crop=crop, lr=lr, seed=seed)
    claim_run_option(
        out, {"command": "vision sr train-teacher", "config": config.to_dict()}, overwrite=overwrite, resume=resume
    )
    autoencoder = tiny_autoencoder(config.autoencoder, device=dev)
    teacher = run(autoencoder, _pairs(config, seed=seed), config, device=dev, progress=True, ckpt_dir=out / "ckpt")
    save_sr(out, {"teacher": teacher}, config)
    typer.echo(f"wrote the teacher to {out}")


@app.command()
def distill(
    teacher: Annotated[Path, typer.Option(help="A folder written by train-teacher.")],
    out: Annotated[Path, typer.Option(help="Folder for teacher, stage1 and stage2 (the student).")],
    stage1_steps: Annotated[int, typer.Option(help="Stage I steps (encoder removed).")] = 300,
    stage2_steps: Annotated[int, typer.Option(help="Stage II steps (decoder removed).")] = 300,
    rand_pad: Annotated[bool, typer.Option(help="RandPad before the stage-II discriminator.")] = True,
    fourier: Annotated[bool, typer.Option(help="The masked Fourier loss in stage II.")] = True,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Distil the teacher in two adversarial stages into a VAE-free pixel student (on the teacher's pairs); --resume
    continues each stage from OUT/ckpt with the same options."""
    from dataclasses import replace

    from flowlab.vision_gen.gendr_pix.store import save_sr
    from flowlab.vision_gen.gendr_pix.train import distill_stage1, distill_stage2

    dev = device_option(device)
    model, base = _load(teacher, "teacher", dev, "--teacher")
    try:
        config = replace(base, stage1_steps=stage1_steps, stage2_steps=stage2_steps, rand_pad=rand_pad,
                         fourier=fourier)  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    claim_run_option(
        out, {"command": "vision sr distill", "config": config.to_dict()}, overwrite=overwrite, resume=resume
    )
    pairs = _pairs(config, seed=config.seed)
    one = distill_stage1(model, pairs, config, device=dev, progress=True, ckpt_dir=out / "ckpt" / "stage1")
    two = distill_stage2(one, model, pairs, config, device=dev, progress=True, ckpt_dir=out / "ckpt" / "stage2")
    save_sr(out, {"teacher": model, "stage1": one, "stage2": two}, config)
    typer.echo(f"wrote the teacher, stage I and the stage-II student to {out}")


@app.command()
def evaluate(
    model: Annotated[Path, typer.Option(help="A folder written by train-teacher or distill.")],
    n: Annotated[int, typer.Option(help="Held-out crops of the test photos.")] = 64,
    size: Annotated[int | None, typer.Option(help="HR crop side (default: the training crop).")] = None,
    cfg_weight: Annotated[float, typer.Option(help="PadCFG's omega for the student's padcfg row.")] = 1.5,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the held-out crops and degradations.")] = 100,
    out: Annotated[Path | None, typer.Option(help="Also write the table as JSON here.")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """PSNR, SSIM (scikit-image) and periodic-artifact energy on held-out test-photo crops of bicubic and of every
    model in MODEL (the student also with PadCFG): one JSON line per row."""
    from flowlab.vision_gen.gendr_pix.evaluate import outputs, sr_quality
    from flowlab.vision_gen.gendr_pix.store import saved_models

    dev = device_option(device)
    if n < 1:
        raise typer.BadParameter(f"expected at least one crop, got {n}", param_hint="--n")
    _cfg_weight(cfg_weight)
    if out is not None and out.suffix != ".json":
        raise typer.BadParameter(f"expected a .json path, got {out}", param_hint="--out")
    try:
        names = saved_models(model)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--model") from err
    loaded = {name: _load(model, name, dev) for name in names}
    config = next(iter(loaded.values()))[1]
    multiple, size = config.factor * config.scale, size or config.crop
    if size < multiple or size % multiple:
        raise typer.BadParameter(f"expected a positive multiple of {multiple}, got {size}", param_hint="--size")
    test = _pairs(config, split="test", size=size, n=n, seed=seed)
    rows = {"bicubic": (None, "single", 1.0)} | {name: (m, "single", 1.0) for name, (m, _) in loaded.items()}
    if "stage2" in loaded:
        rows["stage2 padcfg"] = (loaded["stage2"][0], "padcfg", cfg_weight)
    table = {}
    for name, (m, mode, weight) in rows.items():
        images = outputs(m, test, factor=config.factor, mode=mode, weight=weight, device=dev)
        table[name] = sr_quality(images, test, period=config.factor)
        typer.echo(json_text({"model": name, **table[name]}))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json_text(table, indent=2))


def _read_image(path: Path):
    import numpy as np
    import torch
    from PIL import Image, UnidentifiedImageError

    if path.suffix.lower() not in _IMAGES:
        raise typer.BadParameter(f"expected a {', '.join(_IMAGES)} file, got {path}", param_hint="IMAGE")
    if not path.is_file():
        raise typer.BadParameter(f"{path} not found", param_hint="IMAGE")
    try:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise typer.BadParameter(f"cannot read {path} as an image: {err}", param_hint="IMAGE") from err
    return torch.from_numpy(rgb.copy()).permute(2, 0, 1)[None].float().div(127.5).sub(1)


def upscale(
    image: Annotated[Path, typer.Argument(help="A PNG or JPEG of any size.")],
    model: Annotated[
        Path | None,
        typer.Option(
            help="A folder written by `flowlab vision sr distill` (default: the quick-recipe student, trained "
            "into the artifact cache on first use: 88 s on 2 cores, plus 122 s for the autoencoder if not cached)."
        ),
    ] = None,
    scale: Annotated[int, typer.Option(help="Upscaling factor; must be the model's.")] = 4,
    out: Annotated[Path | None, typer.Option(help="Output PNG or JPEG (default: IMAGE_x{scale}.png).")] = None,
    mode: Annotated[str, typer.Option(help="single, ensemble (two pads) or padcfg.")] = "single",
    cfg_weight: Annotated[float, typer.Option(help="PadCFG's omega (mode padcfg).")] = 1.5,
    tile: Annotated[int | None, typer.Option(help="Upscaled tile side for images larger than memory allows.")] = None,
    overlap: Annotated[int, typer.Option(help="Tile overlap in upscaled pixels (blended).")] = 32,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Upscale IMAGE with a trained GenDR-Pix student (no VAE; `--model`, or the default student): bicubic, then one
    pixel-space forward (or PadCFG), optionally tile by tile."""
    from PIL import Image

    from flowlab.vision_gen.gendr_pix.sample import MODES
    from flowlab.vision_gen.gendr_pix.sample import upscale as run

    dev = device_option(device)
    if mode not in MODES:
        raise typer.BadParameter(f"expected one of {', '.join(MODES)}, got {mode!r}", param_hint="--mode")
    _cfg_weight(cfg_weight)
    out = out or image.with_name(f"{image.stem}_x{scale}.png")
    if out.suffix.lower() not in _IMAGES:
        raise typer.BadParameter(f"expected a {', '.join(_IMAGES)} path, got {out}", param_hint="--out")
    if model is None:
        from flowlab.vision_gen.gendr_pix import pretrained

        typer.echo("no --model: the default student (built into the artifact cache on first use)", err=True)
        model = pretrained.default_student(pretrained.QUICK_RECIPE)
    student, config = _load(model, "stage2", dev)
    if scale != config.scale:
        raise typer.BadParameter(f"the model in {model} upscales by {config.scale}, got {scale}", param_hint="--scale")
    if tile is not None and tile < 4 * config.factor:
        raise typer.BadParameter(f"expected a tile >= {4 * config.factor}, got {tile}", param_hint="--tile")
    if overlap < 0 or (tile is not None and 2 * overlap >= tile):
        raise typer.BadParameter(f"expected 0 <= overlap < tile / 2, got overlap={overlap}, tile={tile}",
                                 param_hint="--overlap")  # fmt: skip
    lq = _read_image(image).to(dev)
    y = run(student, lq, scale=scale, factor=config.factor, mode=mode, weight=cfg_weight, tile=tile, overlap=overlap)
    pixels = y[0].add(1).mul(127.5).round().clamp(0, 255).byte().permute(1, 2, 0).cpu().numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(out)
    typer.echo(f"wrote {pixels.shape[1]}x{pixels.shape[0]} to {out}")
