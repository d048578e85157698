"""MOLM's training objective, shared with its baselines: the verification loss (BCE of the extractor's logits on
randomly attacked watermarked images against the key bits) plus lambda times the imperceptibility loss (the kit's
digits perceptual distance to the clean decode). The training attacks are differentiable or straight-through
(JPEG through PIL forward, identity backward)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from flowlab.vision_gen.kit.attacks import average_residual, forge, parse_attack, straight_through
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet
from flowlab.vision_gen.kit.perceptual import digits_perceptual

__all__ = ["TRAIN_ATTACKS", "forgery_loss", "random_attack", "watermark_loss"]

#: the training transforms Pi (the identity included), one drawn per batch
TRAIN_ATTACKS = ("none", "gaussian_noise@0.04", "gaussian_blur@0.8", "brightness@1.3", "contrast@0.7",
                 "resize@0.5", "rotate@8", "rotate@-8", "shift", "jpeg@50")  # fmt: skip


def _shift(x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Roll by one random (dy, dx) in {-1, 0, 1}^2 (a 1 px crop-and-pad)."""
    dy, dx = (int(v) for v in torch.randint(-1, 2, (2,), generator=generator))
    return torch.roll(x, shifts=(dy, dx), dims=(-2, -1))


def _training_attack(spec: str) -> Callable[..., torch.Tensor]:
    if spec == "none":
        return lambda x, generator=None: x
    if spec == "shift":
        return _shift
    attack = parse_attack(spec)
    return straight_through(attack) if spec.startswith(("jpeg", "median_filter")) else attack


_ATTACKS = {spec: _training_attack(spec) for spec in TRAIN_ATTACKS}


def random_attack(images: torch.Tensor, generator: torch.Generator, attacks: tuple[str, ...] = TRAIN_ATTACKS):
    """One attack of `attacks` drawn with `generator`, applied to the whole batch (B, C, H, W) in [0, 1]."""
    spec = attacks[int(torch.randint(0, len(attacks), (1,), generator=generator))]
    return _ATTACKS[spec](images, generator=generator)


def watermark_loss(
    logits: torch.Tensor,
    keys: torch.Tensor,
    marked: torch.Tensor,
    clean: torch.Tensor,
    net: DigitsFeatureNet,
    lam: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """BCE(logits (B, M), keys (B, M)) + lam * digits_perceptual(marked, clean) (both (B, 1, H, W) in [-1, 1]) ->
    (loss, logs: ver, imp, bit_acc)."""
    ver = F.binary_cross_entropy_with_logits(logits, keys.float())
    imp = digits_perceptual(marked, clean, net)
    acc = ((logits > 0).long() == keys).float().mean()
    return ver + lam * imp, {"ver": ver.detach(), "imp": imp.detach(), "bit_acc": acc.detach()}


def forgery_loss(
    extractor: torch.nn.Module, marked: torch.Tensor, clean: torch.Tensor, others: torch.Tensor
) -> torch.Tensor:
    """The anti-forgery term: the averaging forger's residual of one key, mean(marked) - mean(clean) over the pool
    marked, clean: (G, 1, H, W) in [-1, 1] (one key), added to the clean decodes others: (B', 1, H, W) in [-1, 1],
    should change nothing the extractor reads: the mean squared difference of its logits on the forgeries and on the
    same clean decodes (0 at the optimum; a forgery reading the key's complement is penalised as much as one reading
    the key). Gradients reach the markers through the residual and the extractor through both readings."""
    residual = average_residual((marked + 1) / 2, (clean + 1) / 2)
    unit = (others + 1) / 2
    return (extractor(forge(unit, residual)) - extractor(unit)).pow(2).mean()
