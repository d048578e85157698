"""`flowlab vision scene3d pretrain|distill|sample|evaluate`: pre-train the dual-mode multi-view model on scenes of 3D
Gaussians, distil it into a few-step student (FlashWorld's 3D mode, or MV-Dist), sample scenes conditioned on test
views as a PNG strip of orbit renders, and evaluate a model (one JSON line: consistency, sharpness, FD, novel-view
PSNR, NFE, seconds per scene)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowlab.core.cli import (
    OVERWRITE_HELP,
    RESUME_HELP,
    SEEDS,
    choice_option,
    claim_run_option,
    device_option,
    json_text,
    option_error,
)
from flowlab.vision_gen.flashworld.names import DISTILL_MODES, MODES

app = typer.Typer(help="FlashWorld: dual-mode multi-view model and cross-mode distillation on 3D Gaussian scenes.",
                  no_args_is_help=True)  # fmt: skip

CHECKPOINT_HELP = "A folder written by `flowlab vision scene3d pretrain` or `distill`."


def _load(checkpoint: Path, device: str, option: str = "--checkpoint"):
    dev = device_option(device)
    from flowlab.vision_gen.flashworld.store import load_model

    try:
        return (*load_model(checkpoint, device=dev, name=option), dev)
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix(f"{option}: "), param_hint=option) from err


def _range(value: int, low: int, high: int, option: str) -> None:
    if not low <= value <= high:
        raise typer.BadParameter(f"expected {low} <= value <= {high}, got {value}", param_hint=option)


def _scenes(meta: dict):
    from flowlab.vision_gen.flashworld.scenes import SceneConfig

    return SceneConfig.from_mapping(meta["scenes"])


@app.command()
def pretrain(
    out: Annotated[Path, typer.Option(help="Folder for the model (model.safetensors, config.json, ckpt/).")],
    size: Annotated[int, typer.Option(help="View side in pixels: 8 or 16.")] = 8,
    n_gaussians: Annotated[int, typer.Option(help="Gaussians per training scene (1..16).")] = 3,
    n_train: Annotated[int, typer.Option(help="Training scenes (16..100000).")] = 4096,
    dim: Annotated[int, typer.Option(help="Transformer width (a multiple of 4 and of --heads).")] = 96,
    depth: Annotated[int, typer.Option(help="Transformer blocks.")] = 4,
    heads: Annotated[int, typer.Option(help="Attention heads.")] = 4,
    steps: Annotated[int, typer.Option(help="Training steps.")] = 1000,
    batch_size: Annotated[int, typer.Option(help="Scenes per step.")] = 32,
    lr: Annotated[float, typer.Option(help="Peak Adam learning rate.")] = 1e-3,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the weights and batches.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Pre-train the dual-mode model (L_MV + L_3D) on generated scenes (cached); --resume continues from OUT/ckpt."""
    if size not in (8, 16):
        raise typer.BadParameter(f"expected 8 or 16, got {size}", param_hint="--size")
    _range(n_gaussians, 1, 16, "--n-gaussians")
    _range(n_train, 16, 100_000, "--n-train")
    dev = device_option(device)
    from flowlab.vision_gen.flashworld.model import DualModeConfig
    from flowlab.vision_gen.flashworld.scenes import RigConfig, SceneConfig
    from flowlab.vision_gen.flashworld.train import PretrainConfig

    rig = RigConfig(size=size)
    try:
        config = PretrainConfig(
            model=DualModeConfig(rig=rig, patch=size // 4, dim=dim, depth=depth, heads=heads),
            scenes=SceneConfig(rig=rig, n_gaussians=n_gaussians, n_train=n_train), steps=steps,
            batch_size=batch_size, lr=lr, seed=seed % 2**63, device=dev.type,
        )  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    claim_run_option(out, {"command": "vision scene3d pretrain", **config.to_dict()}, overwrite=overwrite,
                     resume=resume)  # fmt: skip
    from flowlab.vision_gen.flashworld.scenes import scene_data
    from flowlab.vision_gen.flashworld.store import save_model
    from flowlab.vision_gen.flashworld.train import pretrain_dual_mode

    views = scene_data(config.scenes, "train").views
    model = pretrain_dual_mode(config, views, device=dev, progress=True, ckpt_dir=out / "ckpt")
    save_model(out, model, kind="pretrained", scenes=config.scenes.to_dict(), pretrain=config.to_dict())
    typer.echo(f"wrote the dual-mode model to {out}")


@app.command()
def distill(
    teacher: Annotated[Path, typer.Option(help="A folder written by `flowlab vision scene3d pretrain`.")],
    out: Annotated[Path, typer.Option(help="Folder for the student (model.safetensors, config.json, ckpt/).")],
    mode: Annotated[str, typer.Option(help="3d (FlashWorld: the 3D mode towards the MV mode) or mv (MV-Dist).")] = "3d",
    nfe: Annotated[int, typer.Option(help="The student's sampling steps (1..16).")] = 4,
    steps: Annotated[int, typer.Option(help="Distillation updates.")] = 80,
    batch_size: Annotated[int, typer.Option(help="Conditioning views per update.")] = 8,
    lr: Annotated[float, typer.Option(help="Student learning rate.")] = 3e-4,
    fake_lr: Annotated[float, typer.Option(help="Fake-score learning rate.")] = 1e-3,
    cmc_weight: Annotated[float, typer.Option(help="Cross-mode consistency weight (0: the -CMC ablation).")] = 0.1,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the batches and noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Distil the pre-trained model into an NFE-step student by DMD with a fake score (+ CMC in 3d mode)."""
    choice_option(mode, DISTILL_MODES, "--mode", "mode")
    _range(nfe, 1, 16, "--nfe")
    from flowlab.vision_gen.flashworld.distill import DistillConfig

    try:
        config = DistillConfig(mode=mode, nfe=nfe, steps=steps, batch_size=batch_size, lr=lr, fake_lr=fake_lr,
                               cmc_weight=cmc_weight, seed=seed % 2**63)  # fmt: skip
    except ValueError as err:
        raise option_error(err) from err
    model, meta, dev = _load(teacher, device, "--teacher")
    if meta.get("kind") != "pretrained" or "scenes" not in meta:
        raise typer.BadParameter(f"{teacher} is not a pre-trained dual-mode model", param_hint="--teacher")
    claim_run_option(out, {"command": "vision scene3d distill", "teacher": str(teacher), **config.to_dict()},
                     overwrite=overwrite, resume=resume)  # fmt: skip
    from flowlab.vision_gen.flashworld.distill import distill_cross_mode
    from flowlab.vision_gen.flashworld.scenes import scene_data
    from flowlab.vision_gen.flashworld.store import save_model

    images = 2 * scene_data(_scenes(meta), "train").views[:, 0] - 1
    student = distill_cross_mode(model, images, config, device=dev, progress=True, ckpt_dir=out / "ckpt")
    save_model(out, student, kind="distilled", scenes=meta["scenes"], distill=config.to_dict())
    typer.echo(f"wrote the {nfe}-step {mode} student to {out}")


def _sampling(checkpoint: Path, device: str, mode: str, nfe: int, n: int, seed: int):
    """The model, its scenes, the n test scenes' renders, one `Sample` of them in `mode` and its seconds per
    scene."""
    model, meta, dev = _load(checkpoint, device)
    import time

    import torch

    from flowlab.vision_gen.flashworld.sample import sample_3d, sample_mv
    from flowlab.vision_gen.flashworld.scenes import scene_data

    scenes = _scenes(meta)
    _range(n, 2, scenes.n_test, "--n")
    test = scene_data(scenes, "test").views[:n].to(dev)
    g = torch.Generator().manual_seed(seed % 2**63)
    noise = torch.randn(n, scenes.rig.views, 3, scenes.rig.size, scenes.rig.size, generator=g).to(dev)
    start = time.perf_counter()
    with torch.inference_mode():
        if mode == "3d":
            out = sample_3d(model, 2 * test[:, 0] - 1, noise, steps=nfe, generator=g)
        else:
            out = sample_mv(model, 2 * test[:, 0] - 1, noise, steps=nfe)
    return model, scenes, test, out, (time.perf_counter() - start) / n


@app.command()
def sample(
    checkpoint: Annotated[Path, typer.Option(help=CHECKPOINT_HELP)],
    out: Annotated[Path, typer.Option(help="PNG strip: per scene, the truth and the sample from an 8-camera orbit.")],
    mode: Annotated[str, typer.Option(help="3d (Gaussians, re-rendered each step) or mv (views, then a fit).")] = "3d",
    nfe: Annotated[int, typer.Option(help="Sampling steps (1..64).")] = 4,
    n: Annotated[int, typer.Option(help="Test scenes to generate (2..n_test; at most 4 are drawn).")] = 4,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Generate scenes conditioned on test views; orbit renders as a PNG strip, one JSON line."""
    choice_option(mode, MODES, "--mode", "mode")
    _range(nfe, 1, 64, "--nfe")
    if out.suffix.lower() != ".png":
        raise typer.BadParameter(f"expected a .png path, got {out}", param_hint="--out")
    model, scenes, test, result, _ = _sampling(checkpoint, device, mode, nfe, n, seed)
    import torch

    from flowlab.vision_gen.flashworld.scenes import orbit_ring, scene_data
    from flowlab.vision_gen.kit.gaussian_fit import fit_gaussians, render_views
    from flowlab.vision_gen.kit.quality import strip_figure

    gaussians = result.gaussians
    if gaussians is None:
        gen = torch.Generator(test.device).manual_seed(seed % 2**63)
        gaussians = fit_gaussians(((result.views + 1) / 2).clamp(0, 1), model.cameras, n_gaussians=6, steps=300,
                                  generator=gen).gaussians  # fmt: skip
    k = min(4, len(test))
    ring = orbit_ring(scenes.rig, 8, device=test.device)
    truth = render_views(scene_data(scenes, "test").scenes.take(slice(0, k)).to(test.device), ring,
                         size=scenes.rig.size)  # fmt: skip
    ours = render_views(gaussians.take(slice(0, k)), ring, size=scenes.rig.size)
    rows = {}
    for j in range(k):
        rows[f"scene {j}: truth"], rows[f"scene {j}: {mode} {nfe} NFE"] = 2 * truth[j] - 1, 2 * ours[j] - 1
    out.parent.mkdir(parents=True, exist_ok=True)
    strip_figure(out, {name: x.cpu() for name, x in rows.items()}, ncol=8)
    typer.echo(json_text({"mode": mode, "nfe": nfe, "n": n, "png": str(out)}))


@app.command()
def evaluate(
    checkpoint: Annotated[Path, typer.Option(help=CHECKPOINT_HELP)],
    mode: Annotated[str, typer.Option(help="3d or mv.")] = "3d",
    nfe: Annotated[int, typer.Option(help="Sampling steps (1..64).")] = 4,
    n: Annotated[int, typer.Option(help="Test scenes (2..n_test).")] = 32,
    fit_steps: Annotated[int, typer.Option(help="Adam steps of the consistency fit (1..5000).")] = 150,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the noise and the fit.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Consistency residual, sharpness, FD, novel-view PSNR, NFE and seconds per scene on the test split."""
    choice_option(mode, MODES, "--mode", "mode")
    _range(nfe, 1, 64, "--nfe")
    _range(fit_steps, 1, 5000, "--fit-steps")
    model, scenes, test, result, seconds = _sampling(checkpoint, device, mode, nfe, n, seed)
    import torch

    from flowlab.vision_gen.flashworld.evaluate import EvalSettings, scene_metrics
    from flowlab.vision_gen.flashworld.scenes import novel_cameras, scene_data

    real = scene_data(scenes, "test").views.to(test.device)
    metrics = scene_metrics(result.views, result.gaussians, test, real, model.cameras,
                            novel_cameras(scenes.rig, device=test.device), EvalSettings(fit_steps=fit_steps),
                            generator=torch.Generator(test.device).manual_seed(seed % 2**63))  # fmt: skip
    typer.echo(json_text({"mode": mode, "nfe": nfe, "n": n, **metrics, "seconds": seconds}))
