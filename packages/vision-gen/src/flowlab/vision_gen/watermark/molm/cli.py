"""`flowlab watermark molm train|evaluate`: train MOLM's markers and extractor in the kit's frozen tiny digits
decoder, and evaluate a trained folder (bit accuracy and TPR@1%FPR per attack on held-out keys, or on one key
folder given with --key; PSNR / SSIM and digits-FD), as one JSON line."""

from __future__ import annotations

import math
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

app = typer.Typer(help="MOLM: key-routed LoRA markers inside a frozen decoder.", no_args_is_help=True)

#: the attacks `evaluate` knows (the kit's, by name@strength; regenerate needs the digits teacher artifact)
_ATTACK_NAMES = ("clean", "gaussian_noise", "brightness", "contrast", "gaussian_blur", "median_filter", "jpeg",
                 "resize", "random_crop", "rotate", "regenerate", "pgd")  # fmt: skip
_DEFAULT_ATTACKS = "clean,gaussian_noise@0.05,brightness@1.5,jpeg@50,resize@0.5,rotate@10,pgd@0.03"


@app.command()
def train(
    out: Annotated[Path, typer.Option(help="Folder for the model (config.json, *.safetensors, ckpt/).")],
    steps: Annotated[int, typer.Option(help="Training steps.")] = 1500,
    batch_size: Annotated[int, typer.Option(help="Latents per step.")] = 64,
    lr: Annotated[float, typer.Option(help="Peak Adam learning rate (one-cycle).")] = 2e-3,
    lam: Annotated[float, typer.Option(help="Weight of the perceptual (imperceptibility) loss.")] = 1.0,
    forgery_weight: Annotated[
        float, typer.Option(help="Weight of the anti-forgery term (0: off, the paper's objective; see RESULTS.md).")
    ] = 0.0,
    adapters: Annotated[int, typer.Option(help="LoRA adapters per block (a power of two: log2 key bits each).")] = 4,
    rank: Annotated[int, typer.Option(help="Adapter rank.")] = 4,
    ae_steps: Annotated[int, typer.Option(help="Training steps of the kit autoencoder artifact to mark.")] = 600,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the adapters, batches, keys and key split.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train the markers and extractor on the digits train split; --resume continues from OUT/ckpt."""
    for value, hint in ((lr, "--lr"), (lam, "--lam"), (forgery_weight, "--forgery-weight")):
        if not math.isfinite(value):
            raise typer.BadParameter("expected a finite number", param_hint=hint)
    if adapters < 2 or adapters & (adapters - 1):
        raise typer.BadParameter(f"expected a power of two >= 2, got {adapters}", param_hint="--adapters")
    if ae_steps < 1:
        raise typer.BadParameter(f"expected a positive number of steps, got {ae_steps}", param_hint="--ae-steps")
    dev = device_option(device)
    from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig
    from flowlab.vision_gen.watermark.molm.model import MolmConfig
    from flowlab.vision_gen.watermark.molm.train import TrainConfig

    seed = seed % 2**63
    try:
        model_config = MolmConfig(num_adapters=adapters, rank=rank)
        config = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, lam=lam, seed=seed, split_seed=seed,
                             forgery_weight=forgery_weight)  # fmt: skip
        ae_config = AutoencoderConfig(steps=ae_steps)
    except ValueError as err:
        raise option_error(
            err, {"num_adapters": "--adapters", "steps": "--steps", "forgery_pool": "--batch-size"}
        ) from err
    spec = {"command": "watermark molm train", "model": model_config.to_dict(), "train": config.to_dict(),
            "autoencoder": ae_config.to_dict()}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    import torch

    from flowlab.vision_gen.kit.autoencoder import tiny_autoencoder
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.metrics import digits_feature_net
    from flowlab.vision_gen.watermark.molm.model import MolmModel
    from flowlab.vision_gen.watermark.molm.store import save_molm
    from flowlab.vision_gen.watermark.molm.train import train_molm

    ae = tiny_autoencoder(ae_config, device="cpu")
    with torch.no_grad():
        z = ae.encode(load_digits_images(16, split="train").x).latent_dist.mode()
    torch.manual_seed(seed)
    model = MolmModel(ae.decoder, model_config)
    logs = train_molm(model, z, config, digits_feature_net(), device=dev, ckpt_dir=out / "ckpt", progress=True)
    save_molm(out, model.cpu(), config, ae_config)
    typer.echo(json_text({"out": str(out), "key_bits": model.key_bits, **logs}))


def _attacks(text: str) -> tuple[str, ...]:
    specs = tuple(s.strip() for s in text.split(",") if s.strip())
    if not specs:
        raise typer.BadParameter("expected comma-separated attacks like clean,jpeg@50", param_hint="--attacks")
    from flowlab.vision_gen.kit.attacks import parse_attack

    for spec in specs:
        name, _, value = spec.partition("@")
        choice_option(name, _ATTACK_NAMES, "--attacks", "attack")
        if name in ("regenerate", "pgd"):
            try:
                strength = float(value or "nan")
            except ValueError:
                strength = math.nan
            if not 0 < strength < 1:
                raise typer.BadParameter(f"{name} expects a strength in (0, 1) after '@', got {spec!r}",
                                         param_hint="--attacks")  # fmt: skip
        elif name != "clean":
            try:
                parse_attack(spec)
            except ValueError as err:
                raise typer.BadParameter(str(err), param_hint="--attacks") from err
    return specs


@app.command()
def evaluate(
    checkpoint: Annotated[Path, typer.Option(help="A folder written by `flowlab watermark molm train`.")],
    key: Annotated[
        Path | None,
        typer.Option(help="A MOLM key folder: evaluate this one key (default: held-out keys, one per image)."),
    ] = None,
    n: Annotated[int, typer.Option(help="Test digits (1..270).")] = 270,
    attacks: Annotated[str, typer.Option(help="Comma-separated attack specs (name@strength).")] = _DEFAULT_ATTACKS,
    forge_keys: Annotated[
        int,
        typer.Option(
            help="Keys (0..n) for the averaging attack and forgery, each key's residual from k = 10, 100 "
            "and 1000 marked train digits (0: skip; with --key: that key)."
        ),
    ] = 0,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the keys and the attacks' randomness.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Bit accuracy and TPR@1%FPR per attack, PSNR / SSIM and digits-FD of a trained model (with --forge-keys, the
    averaging attack and forgery too), one JSON line."""
    if not 1 <= n <= 270:
        raise typer.BadParameter(f"expected 1 <= n <= 270 (the test split), got {n}", param_hint="--n")
    if not 0 <= forge_keys <= n:
        raise typer.BadParameter(f"expected 0 <= forge-keys <= n = {n}, got {forge_keys}", param_hint="--forge-keys")
    specs = _attacks(attacks)
    dev = device_option(device)
    import torch

    from flowlab.vision_gen.kit.autoencoder import tiny_autoencoder
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.watermark.molm.evaluate import Scheme, attack_metrics, averaging_metrics, quality_metrics
    from flowlab.vision_gen.watermark.molm.model import key_split, sample_keys
    from flowlab.vision_gen.watermark.molm.store import load_molm, load_molm_key

    try:
        model, config, ae_config = load_molm(checkpoint, device=dev)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err).removeprefix("model: "), param_hint="--checkpoint") from err
    seed = seed % 2**63
    if key is not None:
        try:
            bits = load_molm_key(key, model.key_bits)
        except (ValueError, FileNotFoundError) as err:
            raise typer.BadParameter(str(err).removeprefix("key: "), param_hint="--key") from err
        keys = bits.view(1, -1).expand(n, -1)
    else:
        keys = sample_keys(n, key_split(model.key_bits, config.split_seed), 1,
                           generator=torch.Generator().manual_seed(seed))  # fmt: skip
    denoiser, data_range = None, 1.0
    if any(s.startswith("regenerate") for s in specs):
        from flowlab.vision_gen.kit.train import digits_denoiser
        from flowlab.vision_gen.watermark.e2e import TEACHER

        denoiser, data_range = digits_denoiser(TEACHER, device=dev), TEACHER.data_range
    encoder = tiny_autoencoder(ae_config, device=dev)

    def latents(split: str, count: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():  # the digits' latents under the marked decoder's own encoder, and their clean decodes
            z = encoder.encode(load_digits_images(16, split=split).x[:count].to(dev)).latent_dist.mode()
            return z, model.clean(z)

    z, clean = latents("test", n)
    keys = keys.to(dev)
    scheme = Scheme("molm", model.mark, model.extractor, model.key_bits)
    row = attack_metrics(scheme, z, clean, keys, specs, denoiser=denoiser, data_range=data_range, seed=seed)
    if forge_keys:
        row |= averaging_metrics(scheme, *latents("train"), z, clean, keys[:1] if key is not None else
                                 keys[:forge_keys], (10, 100, 1000))  # fmt: skip
    typer.echo(json_text({"key_bits": model.key_bits, "n": n, **row, **quality_metrics(scheme, z, clean, keys)}))
