"""`flowlab vision patronus train|sample|explain`: train Patronus (or the DiffAE baseline) with its activation prior
on the digits (optionally the planted-shortcut digits), sample it (reconstruction-conditioned or unconditional), and
explain it (prototype patches, where, when, manipulation), each explanation as a PNG and one JSON line."""

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
from flowlab.vision_gen.patronus.names import EXPLANATIONS, PROTO_INITS, VARIANTS

app = typer.Typer(help="Patronus: an interpretable diffusion model conditioned on prototype activations.",
                  no_args_is_help=True)  # fmt: skip

MODES = ("recon", "uncond")


def _png(path: Path, option: str) -> Path:
    if path.suffix.lower() != ".png":
        raise typer.BadParameter(f"expected a .png path, got {path}", param_hint=option)
    return path


def _load(checkpoint: Path, device: str):
    dev = device_option(device)
    from flowlab.vision_gen.patronus.store import load_model

    try:
        return (*load_model(checkpoint, device=dev, name="--checkpoint"), dev)
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix("--checkpoint: "), param_hint="--checkpoint") from err


@app.command()
def train(
    out: Annotated[
        Path, typer.Option(help="Folder for the model (model.safetensors, prior.safetensors, config.json, ckpt/).")
    ],
    variant: Annotated[str, typer.Option(help=f"One of {', '.join(VARIANTS)}.")] = "patronus",
    size: Annotated[int, typer.Option(help="Image side: 8, 16 or 32 (digits upsampled).")] = 8,
    num_prototypes: Annotated[int, typer.Option(help="Prototypes m (the code's dimension for diffae).")] = 16,
    base_channels: Annotated[int, typer.Option(help="UNet base width.")] = 16,
    proto_init: Annotated[
        str, typer.Option(help="uniform (U(0,1), official) or patches (random patch features).")
    ] = "patches",
    distinct_weight: Annotated[float, typer.Option(help="Weight of the prototype distinctiveness loss.")] = 0.0,
    steps: Annotated[int, typer.Option(help="Training steps.")] = 2000,
    batch_size: Annotated[int, typer.Option(help="Images per step.")] = 64,
    lr: Annotated[float, typer.Option(help="Peak Adam learning rate (one-cycle).")] = 1e-3,
    prior_steps: Annotated[int, typer.Option(help="Training steps of the activation prior.")] = 1500,
    shortcut: Annotated[
        bool, typer.Option(help="Train on the planted-shortcut digits (a corner dot on every 0).")
    ] = False,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the weights, batches and noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train the model, then its activation prior, on the digits train split; --resume continues from OUT/ckpt."""
    choice_option(variant, VARIANTS, "--variant")
    choice_option(proto_init, PROTO_INITS, "--proto-init")
    if size not in (8, 16, 32):
        raise typer.BadParameter(f"expected 8, 16 or 32, got {size}", param_hint="--size")
    dev = device_option(device)
    from flowlab.vision_gen.patronus.model import ModelConfig
    from flowlab.vision_gen.patronus.prior import PriorConfig
    from flowlab.vision_gen.patronus.train import TrainConfig

    stack = {} if size == 8 else {"enc_channels": (32, 64, 64), "enc_kernels": (3, 3, 1), "enc_strides": (2, 1, 1),
                                  "enc_paddings": (1, 0, 0)}  # fmt: skip
    try:
        model_config = ModelConfig(variant=variant, size=size, num_prototypes=num_prototypes,
                                   base_channels=base_channels, proto_init=proto_init,
                                   distinct_weight=distinct_weight, **stack)  # fmt: skip
        config = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, seed=seed % 2**63)
    except ValueError as err:
        raise option_error(err) from err
    try:
        prior_config = PriorConfig(steps=prior_steps, seed=seed % 2**63)
    except ValueError as err:
        raise option_error(err, {"steps": "--prior-steps"}) from err
    spec = {"command": "vision patronus train", "model": model_config.to_dict(), "train": config.to_dict(),
            "prior": prior_config.to_dict(), "shortcut": shortcut}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.shortcuts import plant_shortcut
    from flowlab.vision_gen.patronus.evaluate import conditions
    from flowlab.vision_gen.patronus.prior import train_activation_prior
    from flowlab.vision_gen.patronus.store import save_model
    from flowlab.vision_gen.patronus.train import train_patronus

    data = load_digits_images(size, split="train")
    if shortcut:
        data = plant_shortcut(data)
    model = train_patronus(model_config, config, data.x, device=dev, progress=True, ckpt_dir=out / "ckpt")
    prior = train_activation_prior(conditions(model, data.x.to(dev)), prior_config, device=dev)
    save_model(out, model, config, prior)
    typer.echo(f"wrote the {variant} model and its activation prior to {out}")


@app.command()
def sample(
    checkpoint: Annotated[Path, typer.Option(help="A folder written by `flowlab vision patronus train`.")],
    out: Annotated[Path, typer.Option(help="PNG grid of the samples.")],
    mode: Annotated[
        str, typer.Option(help="recon (s of test digits, fresh noise) or uncond (s from the prior).")
    ] = "uncond",
    n: Annotated[int, typer.Option(help="Samples (2..270).")] = 100,
    steps: Annotated[int, typer.Option(help="DDIM steps.")] = 50,
    fd: Annotated[bool, typer.Option(help="Also print the samples' digits-FD against the test split.")] = False,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Sample digits by deterministic DDIM and save them as a PNG grid; one JSON line (with --fd, the digits-FD)."""
    choice_option(mode, MODES, "--mode")
    if not 2 <= n <= 270:
        raise typer.BadParameter(f"expected 2 <= n <= 270, got {n}", param_hint="--n")
    if not 1 <= steps < 1000:
        raise typer.BadParameter(f"expected 1 <= steps < 1000, got {steps}", param_hint="--steps")
    _png(out, "--out")
    model, _, prior, dev = _load(checkpoint, device)
    import torch

    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.quality import fd_with_floor, save_image_grid
    from flowlab.vision_gen.patronus.evaluate import conditions
    from flowlab.vision_gen.patronus.sample import sample_images, sample_unconditional

    seed %= 2**63
    size, m = model.config.size, model.config.num_prototypes
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(n, 1, size, size, generator=g).to(dev)
    if mode == "recon":
        cond = conditions(model, load_digits_images(size, split="test").x[:n].to(dev))
        x = sample_images(model, cond, noise, steps=steps)
    else:
        if prior is None:
            raise typer.BadParameter("this model has no activation prior; use --mode recon", param_hint="--mode")
        x, _ = sample_unconditional(model, prior, noise, torch.randn(n, m, generator=g).to(dev), steps=steps)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_image_grid(out, x.cpu())
    row = {"variant": model.config.variant, "mode": mode, "n": n, "steps": steps, "png": str(out)}
    if fd:
        result = fd_with_floor(x.cpu(), "test", seed=seed)
        row |= {"fd": result.fd, "fd_floor": result.floor}
    typer.echo(json_text(row))


@app.command()
def explain(
    checkpoint: Annotated[Path, typer.Option(help="A folder written by `flowlab vision patronus train`.")],
    plot: Annotated[Path, typer.Option(help="PNG of the explanation.")],
    what: Annotated[str, typer.Option(help=f"One of {', '.join(EXPLANATIONS)}.")] = "prototypes",
    prototype: Annotated[int, typer.Option(help="The prototype to scale (manipulate; -1: the most variable).")] = -1,
    n: Annotated[int, typer.Option(help="Validation digits to explain (2..270).")] = 32,
    steps: Annotated[int, typer.Option(help="DDIM steps.")] = 20,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the fixed noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """What (each prototype's best-matching patch), where (|Δx| heat maps of boosting each prototype, and the share
    inside its receptive field against random cells), when (activations of x̂_0 along sampling) or manipulate
    (one prototype scaled 0..3); a PNG and one JSON line of numbers."""
    choice_option(what, EXPLANATIONS, "--what", "explanation")
    if not 2 <= n <= 270:
        raise typer.BadParameter(f"expected 2 <= n <= 270, got {n}", param_hint="--n")
    if not 1 <= steps < 1000:
        raise typer.BadParameter(f"expected 1 <= steps < 1000, got {steps}", param_hint="--steps")
    _png(plot, "--plot")
    model, _, _, dev = _load(checkpoint, device)
    if model.config.variant != "patronus":
        raise typer.BadParameter(f"the {model.config.variant} baseline has no prototypes", param_hint="--checkpoint")
    m = model.config.num_prototypes
    if not -1 <= prototype < m:
        raise typer.BadParameter(f"expected -1 or a prototype in [0, {m}), got {prototype}", param_hint="--prototype")
    import torch

    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.quality import strip_figure
    from flowlab.vision_gen.patronus import explain as procedures
    from flowlab.vision_gen.patronus import plots
    from flowlab.vision_gen.patronus.evaluate import conditions

    size = model.config.size
    images = load_digits_images(size, split="val").x[:n].to(dev)
    noise = torch.randn(images.shape, generator=torch.Generator().manual_seed(seed % 2**63)).to(dev)
    s = conditions(model, images)
    plot.parent.mkdir(parents=True, exist_ok=True)
    row: dict = {"what": what, "n": n}
    if what == "prototypes":
        plots.prototype_patches(plot, model, load_digits_images(size, split="train").x.to(dev))
        row["s_mean"] = s.mean(0).tolist()
    elif what == "where":
        target = conditions(model, load_digits_images(size, split="train").x.to(dev)).max(0).values
        loc = procedures.localisation_score(model, images, noise, target, steps=steps, seed=seed % 2**63)
        plots.heat_map_grid(plot, loc.heat, loc.prototypes)
        row |= loc.metrics
    elif what == "when":
        curve = procedures.emergence_curve(model, noise, s, steps=steps).cpu()
        plots.emergence_plot(plot, curve)
        row["final"] = curve[-1].tolist()
    else:
        j = int(s.std(0).argmax()) if prototype < 0 else prototype
        scales = (0, 0.5, 1, 2, 3)
        scaled = procedures.manipulate(model, noise[:10], s[:10], j, scales, steps=steps)
        strip_figure(plot, {f"s_{j} x {c:g}": scaled[k] for k, c in enumerate(scales)})
        row["prototype"] = j
    typer.echo(json_text(row))
