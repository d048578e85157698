"""The MOLM evaluation protocol, the same for MOLM and every baseline (a `Scheme`: mark latents with keys, read
logits from images): bit accuracy and TPR at 1 % FPR under each attack, the averaging attack and forgery with the
residual of k images of a key (over many keys), PSNR / SSIM and digits-FD of watermarked against clean decodes.

Detection score of an image for a key: mean_m (2 key_m - 1) logit_m; the negatives are the clean decodes of the
same latents under the same attack, scored against the same keys; TPR at the empirical 1 % FPR threshold.
Attack specs: the kit's ("jpeg@50", "rotate@10", ...), "regenerate@<noise level>" (one-step re-denoising with a
digits diffusion model) and "pgd@<eps>" (10 signed-gradient steps pushing the extractor's logits away from its own
decisions: an attacker holding the extractor but not the key).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from flowlab.vision_gen.kit.attacks import average_residual, forge, pgd, remove_residual, resolve_attack
from flowlab.vision_gen.kit.data import to_unit
from flowlab.vision_gen.kit.metrics import digits_fd
from flowlab.vision_gen.kit.quality import psnr_ssim
from flowlab.vision_gen.watermark.evaluate import tpr_at_fpr

__all__ = ["EVAL_ATTACKS", "Scheme", "attack_metrics", "averaging_metrics", "metric_name", "quality_metrics"]

EVAL_ATTACKS = ("clean", "gaussian_noise@0.05", "brightness@1.5", "contrast@0.5", "gaussian_blur@1.0",
                "median_filter@3", "jpeg@50", "jpeg@25", "resize@0.5", "random_crop@0.6", "rotate@10",
                "regenerate@0.2", "pgd@0.03")  # fmt: skip


@dataclass(frozen=True)
class Scheme:
    """mark(z (B, ...), keys (B, M)) -> images (B, C, S, S) in [-1, 1]; read(images (B, C, S, S) in [0, 1]) ->
    (B, M) logits; bits = M."""

    name: str
    mark: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    read: Callable[[torch.Tensor], torch.Tensor]
    bits: int


def metric_name(spec: str) -> str:
    """'jpeg@50' -> 'jpeg50', 'rotate@-8' -> 'rotate_m8', 'regenerate@0.2' -> 'regenerate0p2'."""
    return spec.replace("@-", "_m").replace("@", "").replace(".", "p")


def _attack(spec: str, images: torch.Tensor, scheme: Scheme, denoiser, data_range: float, seed: int):
    name, _, value = spec.partition("@")
    if name == "pgd":
        with torch.no_grad():
            target = (scheme.read(images) > 0).float()
        return pgd(images, lambda x: F.binary_cross_entropy_with_logits(scheme.read(x), target), eps=float(value))
    attack = resolve_attack(spec, denoiser=denoiser, data_range=data_range)
    return attack(images, generator=torch.Generator().manual_seed(seed))


def _scores(logits: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-image bit accuracy (B,), detection score (B,))."""
    acc = ((logits > 0).long() == keys).double().mean(-1)
    return acc, ((2 * keys - 1) * logits).double().mean(-1)


def attack_metrics(
    scheme: Scheme,
    z: torch.Tensor,
    clean: torch.Tensor,
    keys: torch.Tensor,
    attacks: tuple[str, ...] = EVAL_ATTACKS,
    *,
    denoiser: torch.nn.Module | None = None,
    data_range: float = 1.0,
    seed: int = 0,
) -> dict[str, float]:
    """`<attack>_bit_acc` and `<attack>_tpr1` for latents z (B, ...), their clean decodes (B, C, S, S) in [-1, 1]
    and keys (B, M); the same attack randomness for watermarked and clean images."""
    with torch.no_grad():
        marked = to_unit(scheme.mark(z, keys))
    base = to_unit(clean)
    out = {}
    for i, spec in enumerate(attacks):
        pos = _attack(spec, marked, scheme, denoiser, data_range, seed + i)
        neg = _attack(spec, base, scheme, denoiser, data_range, seed + i)
        with torch.no_grad():
            acc, s_pos = _scores(scheme.read(pos), keys)
            _, s_neg = _scores(scheme.read(neg), keys)
        out[f"{metric_name(spec)}_bit_acc"] = float(acc.mean())
        out[f"{metric_name(spec)}_tpr1"] = tpr_at_fpr(s_pos, s_neg, fpr=0.01)
    return out


def averaging_metrics(
    scheme: Scheme, z_pool: torch.Tensor, clean_pool: torch.Tensor, z: torch.Tensor, clean: torch.Tensor,
    keys: torch.Tensor, ks: tuple[int, ...],
) -> dict[str, float]:  # fmt: skip
    """The averaging attack and forgery, each key of keys (K, M) on its own: residual = mean of k watermarked pool
    images of the key - mean of k clean pool images (pool latents (N, ...), decodes (N, C, S, S)). Means over the K
    keys: `avg<k>_bit_acc`, bit accuracy after subtracting the residual from the key's watermarked test images of z;
    `forge<k>_bit_acc` and `forge<k>_detect`, bit accuracy of the key and the share detected (score above the clean
    images' 99th percentile for that key) when adding it to the clean test images; `forge_null_bit_acc`, the clean
    test images read against the keys (what a forgery that carries nothing scores).

    `forge_chance_lo` / `forge_chance_hi`: the 99 % binomial interval of chance for a forgery bit accuracy. Its
    trials are the K x M key bits, not the images x bits: if the residual carries nothing, each image reads the same
    bits whatever the key, so the images of one key are not independent trials (with one 8-bit key the interval
    is about 0.05-0.95), while the keys' bits are independent fair coins."""
    if keys.ndim != 2 or keys.shape[1] != scheme.bits:
        raise ValueError(f"keys: expected (K, {scheme.bits}), got {tuple(keys.shape)}")
    sums: dict[str, float] = {}
    top = min(max(ks), z_pool.shape[0])
    unit_clean, unit_pool = to_unit(clean), to_unit(clean_pool[:top])
    with torch.no_grad():
        base = scheme.read(unit_clean)
        for key in keys:
            one = key.view(1, -1).expand(z.shape[0], -1)
            marked = to_unit(scheme.mark(z, one))
            null_acc, s_clean = _scores(base, one)
            threshold = torch.quantile(s_clean, 0.99)
            row = {"forge_null_bit_acc": float(null_acc.mean())}
            pool_marked = to_unit(scheme.mark(z_pool[:top], key.view(1, -1).expand(top, -1)))
            for k in ks:
                k = min(k, top)
                residual = average_residual(pool_marked[:k], unit_pool[:k])
                acc, _ = _scores(scheme.read(remove_residual(marked, residual)), one)
                f_acc, f_score = _scores(scheme.read(forge(unit_clean, residual)), one)
                row |= {f"avg{k}_bit_acc": float(acc.mean()), f"forge{k}_bit_acc": float(f_acc.mean()),
                        f"forge{k}_detect": float((f_score > threshold).double().mean())}  # fmt: skip
            sums = {name: sums.get(name, 0.0) + value for name, value in row.items()}
    out = {name: value / keys.shape[0] for name, value in sums.items()}
    half = 2.576 * math.sqrt(0.25 / keys.numel())
    return out | {"forge_chance_lo": 0.5 - half, "forge_chance_hi": 0.5 + half}


def quality_metrics(scheme: Scheme, z: torch.Tensor, clean: torch.Tensor, keys: torch.Tensor) -> dict[str, float]:
    """PSNR / SSIM of the watermarked decodes against the clean ones, digits-FD of each against the test split."""
    with torch.no_grad():
        marked = scheme.mark(z, keys).clamp(-1, 1)
    q = psnr_ssim(marked, clean.clamp(-1, 1))
    return {"psnr": float(q.psnr.mean()), "ssim": float(q.ssim.mean()), "fd_marked": digits_fd(marked),
            "fd_clean": digits_fd(clean.clamp(-1, 1))}  # fmt: skip
