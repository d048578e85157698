"""`flowlab vision promoe train|analyse`: train a variant (ProMoE, a baseline or an ablation) on the 8x8 digits, and
analyse a trained one's routing (and, with --samples, its sample quality)."""

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
from flowlab.vision_gen.promoe.names import OBJECTIVES, VARIANTS

app = typer.Typer(help="ProMoE: a mixture-of-experts DiT with explicit routing guidance.", no_args_is_help=True)


@app.command()
def train(
    out: Annotated[Path, typer.Option(help="Folder for the model (model.safetensors, config.json, ckpt/).")],
    variant: Annotated[str, typer.Option(help=f"One of {', '.join(VARIANTS)}.")] = "promoe",
    objective: Annotated[str, typer.Option(help="rf (rectified flow) or ddpm.")] = "rf",
    size: Annotated[int, typer.Option(help="Image side: 8, 16 or 32 (digits upsampled).")] = 8,
    steps: Annotated[int, typer.Option(help="Training steps.")] = 3000,
    batch_size: Annotated[int, typer.Option(help="Images per step.")] = 128,
    lr: Annotated[float, typer.Option(help="Peak Adam learning rate (one-cycle).")] = 1e-3,
    dim: Annotated[int, typer.Option(help="DiT width.")] = 64,
    depth: Annotated[int, typer.Option(help="DiT blocks (MoE in the odd ones).")] = 4,
    num_routed: Annotated[int, typer.Option(help="Prototype-routed experts per MoE block.")] = 6,
    rcl_weight: Annotated[float, typer.Option(help="Weight of the routing contrastive loss.")] = 1.0,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the weights, batches, noise and label dropout.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train one variant on the digits train split; --resume continues from OUT/ckpt with the same options."""
    choice_option(variant, VARIANTS, "--variant")
    choice_option(objective, OBJECTIVES, "--objective")
    if size not in (8, 16, 32):
        raise typer.BadParameter(f"expected 8, 16 or 32, got {size}", param_hint="--size")
    dev = device_option(device)
    from flowlab.vision_gen.promoe.model import ModelConfig
    from flowlab.vision_gen.promoe.train import TrainConfig

    try:
        model_config = ModelConfig(variant=variant, size=size, dim=dim, depth=depth, num_routed=num_routed,
                                   rcl_weight=rcl_weight)  # fmt: skip
        config = TrainConfig(objective=objective, steps=steps, batch_size=batch_size, lr=lr, seed=seed % 2**63)
    except ValueError as err:
        raise option_error(err) from err
    spec = {"command": "vision promoe train", "model": model_config.to_dict(), "train": config.to_dict()}
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.promoe.store import save_model
    from flowlab.vision_gen.promoe.train import train_promoe

    data = load_digits_images(size, split="train")
    model = train_promoe(model_config, config, data.x, data.y, device=dev, progress=True, ckpt_dir=out / "ckpt")
    save_model(out, model, model_config, config)
    typer.echo(f"wrote the {variant} model to {out}")


@app.command()
def analyse(
    checkpoint: Annotated[Path, typer.Option(help="A folder written by `flowlab vision promoe train`.")],
    n: Annotated[int, typer.Option(help="Validation digits routed at each time.")] = 270,
    samples: Annotated[int, typer.Option(help="Also sample this many digits for digits-FD (0: routing only).")] = 0,
    cfg: Annotated[float, typer.Option(help="Guidance scale of the samples.")] = 1.0,
    sample_steps: Annotated[int, typer.Option(help="Sampler steps.")] = 50,
    plot: Annotated[Path | None, typer.Option(help="Save the routing heat map (last MoE block) as this PNG.")] = None,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the noise.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Routing metrics (expert-class NMI, subset JS divergence, utilisation entropy, dead experts, expert subspace
    similarity, null-label tokens to the unconditional expert) and, with --samples, digits-FD, as one JSON line."""
    import math

    if not 10 <= n <= 270:
        raise typer.BadParameter(f"expected 10 <= n <= 270 (the validation split), got {n}", param_hint="--n")
    if samples != 0 and not 2 <= samples <= 1257:
        raise typer.BadParameter(f"expected 0 or 2..1257 samples, got {samples}", param_hint="--samples")
    if not (math.isfinite(cfg) and cfg >= 0):
        raise typer.BadParameter(f"expected a finite scale >= 0, got {cfg}", param_hint="--cfg")
    if sample_steps < 1:
        raise typer.BadParameter(f"expected at least 1 step, got {sample_steps}", param_hint="--sample-steps")
    if plot is not None and plot.suffix.lower() != ".png":
        raise typer.BadParameter(f"expected a .png path, got {plot}", param_hint="--plot")
    dev = device_option(device)
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.promoe.analysis import routing_heatmap
    from flowlab.vision_gen.promoe.evaluate import routing_analysis, sample_quality
    from flowlab.vision_gen.promoe.store import load_model

    try:
        model, model_config, config = load_model(checkpoint, device=dev, name="--checkpoint")
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix("--checkpoint: "), param_hint="--checkpoint") from err
    if plot is not None and not model_config.moe:
        raise typer.BadParameter("the dense variant has no routing to plot", param_hint="--plot")
    data = load_digits_images(model_config.size, split="val")
    seed = seed % 2**63
    routing = routing_analysis(model, data.x[:n].to(dev), data.y[:n].to(dev), objective=config.objective, seed=seed)
    row = {"variant": model_config.variant, **routing.metrics}
    if samples:
        quality = sample_quality(model, n=samples, objective=config.objective, steps=sample_steps, cfg_scale=cfg,
                                 seed=seed)  # fmt: skip
        row |= {"cfg": cfg, **quality}
    typer.echo(json_text(row))
    if plot is not None:
        plot.parent.mkdir(parents=True, exist_ok=True)
        last = max(int(name.split("@")[0]) for name in routing.tables)
        routing_heatmap(plot, {f"block {name}": t for name, t in routing.tables.items() if name.startswith(f"{last}@")})
        typer.echo(f"wrote the routing heat map to {plot}")
