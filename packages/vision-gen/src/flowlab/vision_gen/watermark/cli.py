"""`flowlab watermark keygen|embed|extract|evaluate`: latent watermarks (Spherical, Gaussian Shading, Tree-Ring).

Keys are folders (key.json + tensors.safetensors); loading one checks its format and shapes. Latents and messages
are exchanged as .pt files holding one tensor (loaded with weights_only=True): latents (B, *latent_shape), messages
(B, l_m) bits. Gaussian Shading with per-image keys also writes/reads the per-image nonces (B, 12).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowlab.core.cli import SEEDS, json_text, load_weights_option, option_error

if TYPE_CHECKING:
    import torch

app = typer.Typer(help="Latent watermarks for diffusion models: Spherical Watermark, Gaussian Shading, Tree-Ring.")

_METHODS = ("spherical", "gaussian_shading", "tree_ring")
_KEY_FILES = ("key.json", "tensors.safetensors")
_EVAL_LATENTS = ((4, 64, 64), (1, 16, 16))


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
    """Watermarked initial latents (use them as the sampler's x_T, e.g. pipe(..., latents=...))."""
    import torch

    from flowlab.vision_gen.watermark import GaussianShading, TreeRing

    if out.suffix != ".pt":
        raise typer.BadParameter(f"expected a .pt path, got {out}", param_hint="--out")
    wm = _key(key)
    g = torch.Generator().manual_seed(seed)
    m = _load_tensor(messages, "--messages") if messages else None
    beside = {}
    try:
        if isinstance(wm, TreeRing):
            z = wm.embed(n if m is None else m.shape[0], generator=g)
        else:
            beside["messages"] = m = torch.randint(0, 2, (n, wm.message_bits), generator=g) if m is None else m
            if isinstance(wm, GaussianShading):
                beside["nonces"] = wm.new_nonces(m.shape[0], generator=g)
                z = wm.embed(m, generator=g, nonces=beside["nonces"])
            else:
                z = wm.embed(m, generator=g)
    except ValueError as err:
        raise option_error(err) from err
    for name, value in beside.items():
        torch.save(value, out.with_suffix(f".{name}.pt"))
    torch.save(z, out)
    typer.echo(f"wrote {tuple(z.shape)} latents to {out}")


@app.command()
def extract(
    key: Annotated[Path, typer.Option(help="Key folder.")],
    latents: Annotated[Path, typer.Option(help=".pt of recovered latents (B, *latent_shape).")],
    message: Annotated[Path | None, typer.Option(help=".pt of the expected (B, l_m) or (l_m,) bits.")] = None,
    nonces: Annotated[Path | None, typer.Option(help="Gaussian Shading per-image nonces .pt.")] = None,
    fpr: Annotated[float, typer.Option(help="False-positive rate of the detection threshold.")] = 0.01,
) -> None:
    """Decode bits (and detect against --message) from recovered latents; prints JSON."""
    if not 0 < fpr < 1:
        raise typer.BadParameter(f"expected a false-positive rate in (0, 1), got {fpr}", param_hint="--fpr")
    from flowlab.vision_gen.watermark import GaussianShading, TreeRing

    wm = _key(key)
    z = _load_tensor(latents, "--latents")
    kw = {"nonces": _load_tensor(nonces, "--nonces")} if isinstance(wm, GaussianShading) and nonces else {}
    m = _load_tensor(message, "--message") if message is not None and not isinstance(wm, TreeRing) else None
    try:
        report = {"distance": wm.distance(z).tolist()} if isinstance(wm, TreeRing) else _decode(wm, z, m, fpr, kw)
    except ValueError as err:
        raise option_error(err, {"messages": "--message"}) from err
    typer.echo(json_text(report))


def _decode(wm, z: torch.Tensor, message: torch.Tensor | None, fpr: float, kw: dict) -> dict:
    """The bits decoded from latents `z` and, given the expected `message`, the detection against it."""
    res = wm.extract(z, **kw)
    report = {"bits": ["".join(map(str, row.tolist())) for row in res.bits]}
    if message is not None:
        det = wm.detect(z, message, fpr=fpr, **kw)
        report.update(
            matches=det.matches.tolist(),
            threshold=det.threshold,
            detected=det.detected.tolist(),
            p_value=det.p_value.tolist(),
        )
    return report


@app.command()
def evaluate(
    protocol: Annotated[str, typer.Option(help="stats | speed")] = "stats",
    scheme: Annotated[str, typer.Option(help="Scheme for stats (see evaluate.SCHEMES) or 'all'.")] = "all",
    message: Annotated[str, typer.Option(help="Spherical: random | fixed (shortcut for the scheme).")] = "random",
    n: Annotated[int, typer.Option(min=2, help="Samples for the statistics.")] = 1000,
    latent: Annotated[str, typer.Option(help="4x64x64 or 1x16x16.")] = "4x64x64",
    seed: Annotated[int, typer.Option(**SEEDS)] = 0,
) -> None:
    """Noise-level Gaussianity statistics or embed/extract speed; prints JSON."""
    import torch

    from flowlab.vision_gen.watermark.evaluate import SCHEMES, speed_table, statistics_table

    if protocol == "speed":
        typer.echo(json_text(speed_table(seed=seed), indent=2))
        return
    if protocol != "stats":
        raise typer.BadParameter(f"--protocol: expected stats or speed, got {protocol!r}")
    if message not in ("random", "fixed"):
        raise typer.BadParameter(f"expected random or fixed, got {message!r}", param_hint="--message")
    shape = _shape(latent)
    if shape not in _EVAL_LATENTS:
        raise typer.BadParameter(f"expected 4x64x64 or 1x16x16, got {latent!r}", param_hint="--latent")
    if scheme == "spherical":
        scheme = f"spherical_{message}"
    schemes = SCHEMES if scheme == "all" else (scheme,)
    if any(s not in SCHEMES for s in schemes):
        raise typer.BadParameter(f"--scheme: expected one of {SCHEMES} or 'all', got {scheme!r}")
    g = torch.Generator().manual_seed(seed)
    table = statistics_table(n, shape, seed=seed, generator=g, schemes=schemes)
    typer.echo(json_text(table, indent=2))
