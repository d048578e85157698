"""A saved watermark key of any method: loading it, embedding with it and reading latents back with it.

wm = load_key("key/")
marked = embed_with_key(wm, 8, generator=torch.Generator().manual_seed(0))  # latents, messages, nonces
report = read_with_key(wm, recovered, marked.messages, nonces=marked.nonces)  # bits, detection, bit accuracy
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from flowlab.vision_gen.watermark.base import LatentWatermark, bits_tensor, read_key_folder
from flowlab.vision_gen.watermark.gaussian_shading import GaussianShading
from flowlab.vision_gen.watermark.spherical import SphericalWatermark
from flowlab.vision_gen.watermark.tree_ring import TreeRing

__all__ = ["Marked", "embed_with_key", "load_key", "read_with_key"]


def load_key(path: str | os.PathLike[str]) -> LatentWatermark:
    """Load any saved watermark key folder (the method is read from key.json)."""
    method, _, _ = read_key_folder(path)
    classes = {c.method: c for c in (SphericalWatermark, GaussianShading, TreeRing)}
    if method not in classes:
        raise ValueError(f"key: unknown watermark method {method!r} in {path}")
    try:
        return classes[method].load(path)
    except (KeyError, TypeError, ValueError) as err:  # a config or tensors that do not make a key of the method
        raise ValueError(f"key: {path} is not a valid {method} key: {str(err).removeprefix('key: ')}") from err


@dataclass(frozen=True)
class Marked:
    """latents: (B, *latent_shape) watermarked initial latents; messages: (B, l_m) their bits (None for Tree-Ring,
    which carries none); nonces: (B, 12) Gaussian Shading's per-image nonces (None for the other methods)."""

    latents: torch.Tensor
    messages: torch.Tensor | None = None
    nonces: torch.Tensor | None = None


def embed_with_key(
    wm: LatentWatermark, n: int, messages: torch.Tensor | None = None, *, generator: torch.Generator
) -> Marked:
    """n watermarked latents of key `wm`, carrying `messages` (B, l_m) (then n = B) or n random messages drawn from
    `generator`, which also draws the per-image randomness."""
    if isinstance(wm, TreeRing):
        return Marked(wm.embed(n if messages is None else messages.shape[0], generator=generator))
    m = torch.randint(0, 2, (n, wm.message_bits), generator=generator) if messages is None else messages
    if isinstance(wm, GaussianShading):
        nonces = wm.new_nonces(m.shape[0], generator=generator)
        return Marked(wm.embed(m, generator=generator, nonces=nonces), m, nonces)
    return Marked(wm.embed(m, generator=generator), m)


def read_with_key(
    wm: LatentWatermark,
    latents: torch.Tensor,
    message: torch.Tensor | None = None,
    *,
    nonces: torch.Tensor | None = None,
    fpr: float = 0.01,
) -> dict:
    """What key `wm` reads in recovered latents (B, *latent_shape), as JSON-ready lists of B entries.

    Spherical / Gaussian Shading: "bits" (strings of 0/1), and given the expected `message` ((l_m,), (1, l_m) or
    (B, l_m) bits) "matches", "bit_accuracy", "detected" and "p_value" per latent against the key's Binomial(l_m, 1/2)
    "threshold" at false-positive rate `fpr`. Tree-Ring: "distance" per latent (small = watermarked) and "detected"
    below the "threshold" distance at `fpr` on unwatermarked Gaussian latents (`TreeRing.null_threshold`)."""
    if isinstance(wm, TreeRing):
        threshold = wm.null_threshold(fpr)
        distance = wm.distance(latents)
        return {"distance": distance.tolist(), "threshold": threshold, "detected": (distance < threshold).tolist()}
    kw = {"nonces": nonces} if isinstance(wm, GaussianShading) else {}
    bits = wm.extract(latents, **kw).bits
    report: dict = {"bits": ["".join(map(str, row.tolist())) for row in bits]}
    if message is None:
        return report
    m = message if message.dim() == 2 else message[None]
    if m.dim() != 2 or m.shape[0] not in (1, bits.shape[0]):
        raise ValueError(
            f"messages: expected (l_m,), (1, l_m) or ({bits.shape[0]}, l_m) bits, got {tuple(message.shape)}"
        )
    det = wm.detect(latents, bits_tensor(m, wm.message_bits), fpr=fpr, **kw)
    return report | {
        "matches": det.matches.tolist(),
        "bit_accuracy": (det.matches.double() / wm.message_bits).tolist(),
        "threshold": det.threshold,
        "detected": det.detected.tolist(),
        "p_value": det.p_value.tolist(),
    }
