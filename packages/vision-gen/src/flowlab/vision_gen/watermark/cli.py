"""`flowlab watermark keygen|embed|extract|generate|invert|attack|detect|evaluate`: latent watermarks (Spherical,
Gaussian Shading, Tree-Ring) on latents and on PNG files.

Keys are folders (key.json + tensors.safetensors); loading one checks its format and shapes. Latents and messages
are exchanged as .pt files holding one tensor (loaded with weights_only=True): latents (B, *latent_shape), messages
(B, l_m) bits. Gaussian Shading with per-image keys also writes/reads the per-image nonces (B, 12). Images are PNG
files, one per image; a model (`--model`) is the kit's digits teacher or a diffusers pipeline folder
(`kit.generators`), sampling from the watermarked latents and inverting images back to them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowlab.core.cli import SEEDS, device_option, json_text, load_weights_option, option_error

if TYPE_CHECKING:
    import torch

    from flowlab.vision_gen.kit.generators import ImageGenerator

app = typer.Typer(help="Latent watermarks for diffusion models: Spherical Watermark, Gaussian Shading, Tree-Ring.")

_METHODS = ("spherical", "gaussian_shading", "tree_ring")
_KEY_FILES = ("key.json", "tensors.safetensors")
_EVAL_LATENTS = ((4, 64, 64), (1, 16, 16))
_PROTOCOLS = ("detection", "stats", "speed")
#: the name of the kit's digits teacher as a --model (`kit.generators.DIGITS_TEACHER`)
_DIGITS = "digits-teacher"
#: the files `generate` writes beside its PNGs
_GENERATED = ("latents.pt", "messages.pt", "nonces.pt")

_MODEL_HELP = (f"{_DIGITS} (the kit's 16x16 digits UNet, trained into the artifact cache on first use: about 9 min on "
               "two CPU threads) or a diffusers pipeline folder (save_pretrained; a pixel "
               "UNet, or a latent one with its VAE and text encoder).")  # fmt: skip
_IMAGES_HELP = "PNG files, one image each, of the model's image size."
_STEPS_HELP = "DDIM inversion steps (trailing grid)."
_MESSAGE_HELP = ".pt of the expected (B, l_m) or (l_m,) bits (e.g. generate's messages.pt)."
_NONCES_HELP = "Gaussian Shading per-image nonces .pt (e.g. generate's nonces.pt)."
_FPR_HELP = "False-positive rate of the detection threshold."


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in text.lower().split("x"))
    except ValueError as err:
        raise typer.BadParameter(f"--latent: expected sizes like 4x64x64, got {text!r}") from err
    if not shape or min(shape) < 1:
        raise typer.BadParameter(f"--latent: expected positive sizes, got {text!r}")
    return shape


def _load_tensor(path: Path, name: str) -> torch.Tensor:
    import torch

    obj = load_weights_option(path, name, map_location="cpu")
    if not isinstance(obj, torch.Tensor):
        raise typer.BadParameter(f"{path} does not hold a single tensor", param_hint=name)
    return obj


def _free_key_folder(out: Path, overwrite: bool) -> None:
    """Refuse to write a key over a file, or over a key unless `overwrite` (the images watermarked with the old key
    could no longer be extracted)."""
    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} is a file; expected a key folder", param_hint="--out")
    if not overwrite and any((out / name).exists() for name in _KEY_FILES):
        raise typer.BadParameter(f"{out} already holds a key (the images watermarked with it need it); pass "
                                 "--overwrite to replace it or choose another folder", param_hint="--out")  # fmt: skip


def _key(path: Path):
    from flowlab.vision_gen.watermark import load_key

    try:
        return load_key(path)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err), param_hint="--key") from err


@app.command()
def keygen(
    out: Annotated[Path, typer.Option(help="Key folder to write.")],
    method: Annotated[str, typer.Option(help="spherical | gaussian_shading | tree_ring")] = "spherical",
    latent: Annotated[str, typer.Option(help="Latent shape, e.g. 4x64x64.")] = "4x64x64",
    seed: Annotated[int, typer.Option(**SEEDS, help="Key seed.")] = 0,
    message_bits: Annotated[
        int, typer.Option(min=0, help="Spherical: l_m (default 512 for 4x64x64, 32 otherwise).")
    ] = 0,
    repetitions: Annotated[int, typer.Option(min=0, help="Spherical: N (odd).")] = 0,
    block_size: Annotated[int, typer.Option(min=0, help="Spherical: rotation block l_c (0 = floor(sqrt(l_x))).")] = 0,
    message_shape: Annotated[str, typer.Option(help="Gaussian Shading: message block, e.g. 4x8x8.")] = "",
    key_mode: Annotated[str, typer.Option(help="Gaussian Shading: fixed | per_image.")] = "per_image",
    radius: Annotated[int, typer.Option(min=1, help="Tree-Ring: ring radius.")] = 10,
    overwrite: Annotated[bool, typer.Option(help="Replace a key already in OUT.")] = False,
) -> None:
    """Draw a watermark key from a seed and save it as a folder; a key already there is kept unless --overwrite."""
    from flowlab.vision_gen.watermark import (
        GaussianShading,
        GaussianShadingConfig,
        SphericalConfig,
        SphericalWatermark,
        TreeRing,
        TreeRingConfig,
    )

    shape = _shape(latent)
    _free_key_folder(out, overwrite)
    try:
        if method == "spherical":
            if shape == (4, 64, 64) and not (message_bits or repetitions):
                cfg = SphericalConfig.stable_diffusion()
            else:
                cfg = SphericalConfig.for_latent(
                    shape, message_bits or 32, repetitions or 7, block_size=block_size or None
                )
            wm = SphericalWatermark.from_seed(cfg, seed)
        elif method == "gaussian_shading":
            ms = (
                _shape(message_shape)
                if message_shape
                else tuple(max(1, s // 8) if i else s for i, s in enumerate(shape))
            )
            wm = GaussianShading.from_seed(GaussianShadingConfig(shape, ms, key_mode), seed)
        elif method == "tree_ring":
            wm = TreeRing.from_seed(TreeRingConfig(shape, radius), seed)
        else:
            raise typer.BadParameter(f"--method: expected one of {_METHODS}, got {method!r}")
    except ValueError as err:
        raise option_error(err, {"latent_shape": "--latent"}) from err
    wm.save(out)
    typer.echo(f"wrote {method} key for latents {shape} to {out}")


@app.command()
def embed(
    key: Annotated[Path, typer.Option(help="Key folder.")],
    out: Annotated[Path, typer.Option(help="Output .pt of watermarked latents (B, *latent_shape).")],
    messages: Annotated[Path | None, typer.Option(help=".pt of (B, l_m) bits; default random.")] = None,
    n: Annotated[int, typer.Option(min=1, help="Number of latents when --messages is not given.")] = 1,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the per-image randomness.")] = 0,
) -> None:
    """Watermarked initial latents (use them as the sampler's x_T, e.g. pipe(..., latents=...)); the messages (and
    Gaussian Shading's nonces) go beside them as OUT.messages.pt (OUT.nonces.pt)."""
    import torch

    if out.suffix != ".pt":
        raise typer.BadParameter(f"expected a .pt path, got {out}", param_hint="--out")
    marked = _marked(_key(key), n, messages, seed)
    for name in ("messages", "nonces"):
        if getattr(marked, name) is not None:
            torch.save(getattr(marked, name), out.with_suffix(f".{name}.pt"))
    torch.save(marked.latents, out)
    typer.echo(f"wrote {tuple(marked.latents.shape)} latents to {out}")


def _marked(wm, n: int, messages: Path | None, seed: int):
    """`embed_with_key` of n latents (or of the bits in `messages`) drawn from `seed`, errors against the options."""
    import torch

    from flowlab.vision_gen.watermark.keys import embed_with_key

    m = _load_tensor(messages, "--messages") if messages else None
    try:
        return embed_with_key(wm, n, m, generator=torch.Generator().manual_seed(seed))
    except ValueError as err:
        raise option_error(err) from err


@app.command()
def extract(
    key: Annotated[Path, typer.Option(help="Key folder.")],
    latents: Annotated[Path, typer.Option(help=".pt of recovered latents (B, *latent_shape).")],
    message: Annotated[Path | None, typer.Option(help=_MESSAGE_HELP)] = None,
    nonces: Annotated[Path | None, typer.Option(help=_NONCES_HELP)] = None,
    fpr: Annotated[float, typer.Option(help=_FPR_HELP)] = 0.01,
) -> None:
    """Decode bits (and detect against --message) from recovered latents; prints JSON."""
    _fpr(fpr)
    wm = _key(key)
    typer.echo(json_text(_read(wm, _load_tensor(latents, "--latents"), *_expected(wm, message, nonces), fpr)))


def _fpr(fpr: float) -> None:
    if not 0 < fpr < 1:
        raise typer.BadParameter(f"expected a false-positive rate in (0, 1), got {fpr}", param_hint="--fpr")


def _expected(wm, message: Path | None, nonces: Path | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The expected bits and the nonces the key reads with (None where it needs none: Tree-Ring carries no bits,
    only Gaussian Shading has nonces)."""
    from flowlab.vision_gen.watermark import GaussianShading, TreeRing

    m = _load_tensor(message, "--message") if message is not None and not isinstance(wm, TreeRing) else None
    ids = _load_tensor(nonces, "--nonces") if nonces is not None and isinstance(wm, GaussianShading) else None
    return m, ids


def _read(wm, z: torch.Tensor, message: torch.Tensor | None, nonces: torch.Tensor | None, fpr: float) -> dict:
    """`read_with_key`, errors against the options."""
    from flowlab.vision_gen.watermark.keys import read_with_key

    try:
        return read_with_key(wm, z, message, nonces=nonces, fpr=fpr)
    except ValueError as err:
        raise option_error(err, {"messages": "--message"}) from err


# ---------------------------------------------------------------------------------------------------- PNG files


def _model(model: str, prompt: str, device: torch.device) -> ImageGenerator:
    """The --model's generator; the digits teacher is only built (into the artifact cache) on first use."""
    from dataclasses import replace

    from flowlab.vision_gen.kit.generators import load_generator
    from flowlab.vision_gen.watermark.e2e import TEACHER

    if model != _DIGITS and not Path(model).is_dir():
        raise typer.BadParameter(f"expected {_DIGITS} or a diffusers pipeline folder, got {model!r}",
                                 param_hint="--model")  # fmt: skip
    try:
        return load_generator(model, digits=replace(TEACHER, device=device.type), prompt=prompt, device=device)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err), param_hint="--model") from err


def _model_for(wm, model: str, prompt: str, device: str) -> ImageGenerator:
    """The --model's generator, which must sample the key's latents."""
    gen = _model(model, prompt, device_option(device))
    if tuple(gen.latent_shape) != tuple(wm.latent_shape):
        raise typer.BadParameter(f"the key is for latents {tuple(wm.latent_shape)}, the model {model} samples "
                                 f"{gen.latent_shape}", param_hint="--key")  # fmt: skip
    return gen


def _images(paths: list[Path], shape: tuple[int, ...] | None = None) -> torch.Tensor:
    from flowlab.vision_gen.kit.image_files import read_images

    try:
        return read_images(paths, shape=shape)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err), param_hint="IMAGES") from err


def _readable(paths: list[Path]) -> list[torch.Tensor]:
    """Each PNG read on its own, (C, H, W) in [0, 1] (greyscale as 1 channel): the files' check before a model loads."""
    return [_images([p])[0] for p in paths]


def _empty_folder(out: Path) -> None:
    """Refuse an --out that is a file or a folder holding anything (its files would mix with the new ones)."""
    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"{out} is a file; expected a folder", param_hint="--out")
    if out.is_dir() and any(out.iterdir()):
        raise typer.BadParameter(f"{out} is not empty (the files there would mix with these); choose a new folder",
                                 param_hint="--out")  # fmt: skip


@app.command()
def generate(
    key: Annotated[Path, typer.Option(help="Key folder (its latent shape must be the model's).")],
    out: Annotated[Path, typer.Option(help="New folder for 000000.png, ..., latents.pt, messages.pt (nonces.pt).")],
    n: Annotated[int, typer.Option(min=1, help="Number of images when --messages is not given.")] = 4,
    messages: Annotated[Path | None, typer.Option(help=".pt of (B, l_m) bits; default random.")] = None,
    model: Annotated[str, typer.Option(help=_MODEL_HELP)] = _DIGITS,
    prompt: Annotated[str, typer.Option(help="Text prompt (pipelines with a text encoder).")] = "",
    steps: Annotated[int, typer.Option(min=1, help="DPM-Solver++(2M) sampling steps (trailing grid).")] = 50,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the messages and the per-image randomness.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
) -> None:
    """Embed the key's watermark in initial latents (as `embed` does) and sample PNG images from them with the
    model; the latents, messages (and Gaussian Shading's nonces) are written beside the images."""
    import torch

    from flowlab.vision_gen.kit.image_files import write_images

    _empty_folder(out)
    wm = _key(key)
    gen = _model_for(wm, model, prompt, device)
    marked = _marked(wm, n, messages, seed)
    images = gen.generate(marked.latents, steps=steps)
    write_images(images, [out / f"{i:06d}.png" for i in range(images.shape[0])])
    for name, value in zip(_GENERATED, (marked.latents, marked.messages, marked.nonces), strict=True):
        if value is not None:
            torch.save(value, out / name)
    typer.echo(f"wrote {images.shape[0]} watermarked {'x'.join(map(str, images.shape[1:]))} PNGs to {out}")


@app.command()
def invert(
    images: Annotated[list[Path], typer.Argument(metavar="IMAGES", help=_IMAGES_HELP)],
    out: Annotated[Path, typer.Option(help="Output .pt of the recovered latents (B, *latent_shape).")],
    model: Annotated[str, typer.Option(help=_MODEL_HELP)] = _DIGITS,
    prompt: Annotated[str, typer.Option(help="Text prompt (pipelines with a text encoder).")] = "",
    steps: Annotated[int, typer.Option(min=1, help=_STEPS_HELP)] = 50,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
) -> None:
    """DDIM-invert PNG images to the model's initial latents (read them with `extract`)."""
    import torch

    if out.suffix != ".pt":
        raise typer.BadParameter(f"expected a .pt path, got {out}", param_hint="--out")
    _readable(images)
    gen = _model(model, prompt, device_option(device))
    z = gen.invert(_images(images, gen.image_shape), steps=steps)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(z, out)
    typer.echo(f"wrote {tuple(z.shape)} latents to {out}")


@app.command()
def attack(
    images: Annotated[
        list[Path], typer.Argument(metavar="IMAGES", help="PNG files (any size; greyscale stays greyscale).")
    ],
    out: Annotated[Path, typer.Option(help="New folder for the attacked PNGs (same file names).")],
    name: Annotated[
        str,
        typer.Option(
            "--attack",
            help="An attack of kit.attacks: gaussian_noise, jpeg, "
            "gaussian_blur, median_filter, random_crop, rotate, resize, ...",
        ),
    ],
    strength: Annotated[
        float | None,
        typer.Option(help="Its strength (std, quality, sigma, kept area, degrees, ...); default the kit's."),
    ] = None,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of image i's randomness: seed + i.")] = 0,
) -> None:
    """Apply one of the kit's attacks to PNG images, writing PNGs (8-bit, as a real attacker's files are)."""
    import torch

    from flowlab.vision_gen.kit.attacks import parse_attack
    from flowlab.vision_gen.kit.image_files import write_images

    try:
        fn = parse_attack(name if strength is None else f"{name}@{strength}")
    except ValueError as err:
        raise option_error(err, {"attack": "--attack", "strength": "--strength"}) from err
    _empty_folder(out)
    if len({p.name for p in images}) < len(images):
        raise typer.BadParameter("two images share a file name (the outputs keep the names)", param_hint="IMAGES")
    for i, (path, x) in enumerate(zip(images, _readable(images), strict=True)):
        g = torch.Generator().manual_seed((seed + i) % 2**64)
        write_images(fn(x[None], generator=g), [out / path.name])
    typer.echo(f"wrote {len(images)} {fn.__name__} PNGs to {out}")


@app.command()
def detect(
    images: Annotated[list[Path], typer.Argument(metavar="IMAGES", help=_IMAGES_HELP)],
    key: Annotated[Path, typer.Option(help="Key folder.")],
    message: Annotated[Path | None, typer.Option(help=_MESSAGE_HELP)] = None,
    nonces: Annotated[Path | None, typer.Option(help=_NONCES_HELP)] = None,
    fpr: Annotated[float, typer.Option(help=_FPR_HELP)] = 0.01,
    model: Annotated[str, typer.Option(help=_MODEL_HELP)] = _DIGITS,
    prompt: Annotated[str, typer.Option(help="Text prompt (pipelines with a text encoder).")] = "",
    steps: Annotated[int, typer.Option(min=1, help=_STEPS_HELP)] = 50,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
) -> None:
    """Invert PNG images with the model and read the key's watermark: bits per image and, against --message, the
    matching bits, bit accuracy, p-value and verdict at the key's threshold (Tree-Ring: distance); prints JSON."""
    _fpr(fpr)
    wm = _key(key)
    m, kw = _expected(wm, message, nonces)
    report = _read(wm, _recovered(wm, images, model, prompt, steps, device, m, kw, fpr), m, kw, fpr)
    typer.echo(json_text({"images": [str(p) for p in images], **report}))


def _recovered(wm, images: list[Path], model: str, prompt: str, steps: int, device: str,
               message: torch.Tensor | None, nonces: torch.Tensor | None, fpr: float) -> torch.Tensor:  # fmt: skip
    """The latents of PNG `images`, inverted with the model once the files fit it and the reading of as many latents
    is known to accept `message` and `nonces` (checked on zeros): a bad input fails before any work."""
    import torch

    from flowlab.vision_gen.watermark import TreeRing

    _readable(images)
    gen = _model_for(wm, model, prompt, device)
    x = _images(images, gen.image_shape)
    if not isinstance(wm, TreeRing):
        _read(wm, torch.zeros(len(images), *wm.latent_shape), message, nonces, fpr)
    return gen.invert(x, steps=steps)


@app.command()
def evaluate(
    images: Annotated[
        list[Path] | None, typer.Argument(metavar="IMAGES", help="PNG files to invert and read (detection).")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(
            help="Key folder: detection reads IMAGES or --latents with it; stats describes the latents it embeds."
        ),
    ] = None,
    latents: Annotated[Path | None, typer.Option(help=".pt of recovered latents, instead of IMAGES.")] = None,
    message: Annotated[Path | None, typer.Option(help=_MESSAGE_HELP)] = None,
    nonces: Annotated[Path | None, typer.Option(help=_NONCES_HELP)] = None,
    fpr: Annotated[float, typer.Option(help=_FPR_HELP)] = 0.01,
    protocol: Annotated[
        str,
        typer.Option(help="detection (the default with IMAGES or --latents) | stats (the default otherwise) | speed"),
    ] = "",
    scheme: Annotated[str, typer.Option(help="Stats without --key: a scheme of evaluate.SCHEMES or 'all'.")] = "all",
    n: Annotated[int, typer.Option(min=2, help="Latents for the statistics.")] = 1000,
    latent: Annotated[str, typer.Option(help="Stats without --key: 4x64x64 (default) or 1x16x16.")] = "",
    seed: Annotated[int, typer.Option(**SEEDS)] = 0,
    model: Annotated[str, typer.Option(help=_MODEL_HELP)] = _DIGITS,
    prompt: Annotated[str, typer.Option(help="Text prompt (pipelines with a text encoder).")] = "",
    steps: Annotated[int, typer.Option(min=1, help=_STEPS_HELP)] = 50,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
) -> None:
    """Detection on a key's images or latents (mean bit accuracy and detection rate at the key's threshold against
    --message; Tree-Ring: mean distance), the Gaussianity statistics of the latents a key (or each scheme) embeds, or
    embed/extract speed; prints JSON."""
    protocol = protocol or ("detection" if images or latents else "stats")
    if protocol not in _PROTOCOLS:
        raise typer.BadParameter(f"expected one of {', '.join(_PROTOCOLS)}, got {protocol!r}", param_hint="--protocol")
    _fpr(fpr)
    if message is not None and str(message) in ("random", "fixed"):
        raise typer.BadParameter("now the expected bits (.pt), as for extract; the statistics of a fixed message are "
                                 "--scheme spherical_fixed", param_hint="--message")  # fmt: skip
    if protocol == "detection":
        summary = _detection(images, key, latents, message, nonces, fpr, model, prompt, steps, device)
        typer.echo(json_text(summary, indent=2))
        return
    given = {"IMAGES": images, "--latents": latents, "--message": message, "--nonces": nonces}
    for name, value in given.items():
        if value:
            raise typer.BadParameter(f"read only by the detection protocol, not by {protocol}", param_hint=name)
    if protocol == "speed":
        if key is not None:
            raise typer.BadParameter("the speed protocol times its own 4x64x64 keys", param_hint="--key")
        from flowlab.vision_gen.watermark.evaluate import speed_table

        typer.echo(json_text(speed_table(seed=seed), indent=2))
        return
    typer.echo(json_text(_statistics(key, scheme, n, latent, seed), indent=2))


def _detection(images: list[Path] | None, key: Path | None, latents: Path | None, message: Path | None,
               nonces: Path | None, fpr: float, model: str, prompt: str, steps: int, device: str) -> dict:  # fmt: skip
    """The detection protocol's summary of the key's reading of IMAGES or --latents."""
    from flowlab.vision_gen.watermark import TreeRing

    if key is None:
        raise typer.BadParameter("the detection protocol reads the watermark with a key folder", param_hint="--key")
    if bool(images) == (latents is not None):
        raise typer.BadParameter("give PNG IMAGES or --latents (one of the two)", param_hint="--latents")
    wm = _key(key)
    m, kw = _expected(wm, message, nonces)
    if m is None and not isinstance(wm, TreeRing):
        raise typer.BadParameter("the expected bits are needed to measure bit accuracy and detection (e.g. "
                                 "generate's messages.pt)", param_hint="--message")  # fmt: skip
    if latents is not None:
        z = _load_tensor(latents, "--latents")
    else:
        z = _recovered(wm, images, model, prompt, steps, device, m, kw, fpr)
    report = _read(wm, z, m, kw, fpr)
    detected = report["detected"]
    summary = {"n": len(detected), "fpr": fpr, "threshold": report["threshold"],
               "detection_rate": sum(detected) / len(detected)}  # fmt: skip
    score = "distance" if isinstance(wm, TreeRing) else "bit_accuracy"
    return summary | {score: sum(report[score]) / len(detected)}


def _statistics(key: Path | None, scheme: str, n: int, latent: str, seed: int) -> dict[str, dict[str, float]]:
    """The stats protocol: Gaussianity of n latents of the key ("key"), or of each scheme's own key."""
    import torch

    from flowlab.vision_gen.watermark.evaluate import SCHEMES, latent_statistics, statistics_table

    g = torch.Generator().manual_seed(seed)
    if key is not None:
        wm = _key(key)
        if latent and _shape(latent) != tuple(wm.latent_shape):
            raise typer.BadParameter(f"the key's latents are {'x'.join(map(str, wm.latent_shape))}, got {latent!r}",
                                     param_hint="--latent")  # fmt: skip
        if scheme != "all":
            raise typer.BadParameter("with --key the statistics are the key's own", param_hint="--scheme")
        return {"key": latent_statistics(_marked(wm, n, None, seed).latents, generator=g)}
    shape = _shape(latent or "4x64x64")
    if shape not in _EVAL_LATENTS:
        raise typer.BadParameter(f"expected 4x64x64 or 1x16x16, got {latent!r}", param_hint="--latent")
    scheme = "spherical_random" if scheme == "spherical" else scheme
    schemes = SCHEMES if scheme == "all" else (scheme,)
    if any(s not in SCHEMES for s in schemes):
        raise typer.BadParameter(f"--scheme: expected one of {SCHEMES} or 'all', got {scheme!r}")
    return statistics_table(n, shape, seed=seed, generator=g, schemes=schemes)
