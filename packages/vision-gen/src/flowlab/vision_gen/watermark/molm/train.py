"""Training MOLM through `flowlab.core.train.fit`: random keys of the training half each step, the frozen decoder's
clean outputs as the imperceptibility target, one random training attack per batch; adapters and extractor
trained with Adam (one-cycle), checkpointed to and resumed from `ckpt_dir`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.train import fit
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet
from flowlab.vision_gen.watermark.molm.model import MolmModel, key_split, sample_keys
from flowlab.vision_gen.watermark.molm.objective import forgery_loss, random_attack, watermark_loss

if TYPE_CHECKING:
    from flowlab.vision_gen.watermark.molm.baselines import WouafLite

__all__ = ["TrainConfig", "train_molm"]


@dataclass(frozen=True)
class TrainConfig(Config):
    """`steps` Adam steps at peak `lr` on batches of `batch_size` latents, each with a random training key (the
    half of the key space picked by `split_seed`); loss = BCE + `lam` * perceptual (+ `forgery_weight` times the
    anti-forgery term, `objective.forgery_loss`, with the first `forgery_pool` latents of a batch marked by one key
    as the forger's pool and the rest as the images forged; 0: off, the paper's objective); `seed` for batches and
    keys."""

    steps: int = 1500
    batch_size: int = 64
    lr: float = 2e-3
    lam: float = 1.0
    seed: int = 0
    split_seed: int = 0
    forgery_weight: float = 0.0
    forgery_pool: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive int, got {getattr(self, name)!r}")
        if not (self.lr > 0 and self.lr < 1):
            raise ValueError(f"lr: expected a learning rate in (0, 1), got {self.lr!r}")
        if not (self.lam >= 0 and self.lam < float("inf")):
            raise ValueError(f"lam: expected a finite weight >= 0, got {self.lam!r}")
        if not (self.forgery_weight >= 0 and self.forgery_weight < float("inf")):
            raise ValueError(f"forgery_weight: expected a finite weight >= 0, got {self.forgery_weight!r}")
        if self.forgery_weight > 0 and not 2 <= self.forgery_pool < self.batch_size:
            raise ValueError(f"forgery_pool: expected 2 <= forgery_pool < batch_size = {self.batch_size}, got "
                             f"{self.forgery_pool!r}")  # fmt: skip


class _Objective(nn.Module):
    """One forward for `fit`: (z, clean) batch -> (loss, logs)."""

    def __init__(
        self, model: MolmModel | WouafLite, net: DigitsFeatureNet, parity: torch.Tensor, config: TrainConfig
    ) -> None:
        super().__init__()
        self.model, self.net, self.config = model, net, config
        self.register_buffer("parity", parity)

    def forward(self, z: torch.Tensor, clean: torch.Tensor, generator: torch.Generator):
        keys = sample_keys(z.shape[0], self.parity.cpu(), 0, generator=generator).to(z.device)
        g = self.config.forgery_pool if self.config.forgery_weight > 0 else 0
        if g:
            keys[:g] = keys[0]  # the forger's pool: one key
        marked = self.model.mark(z, keys)
        logits = self.model.extractor(random_attack((marked + 1) / 2, generator))
        loss, logs = watermark_loss(logits, keys, marked, clean, self.net, self.config.lam)
        if g:
            forgery = forgery_loss(self.model.extractor, marked[:g], clean[:g], clean[g:])
            loss, logs = loss + self.config.forgery_weight * forgery, logs | {"forgery": forgery.detach()}
        return loss, logs


def train_molm(
    model: MolmModel | WouafLite,
    latents: torch.Tensor,
    config: TrainConfig,
    net: DigitsFeatureNet,
    *,
    device: torch.device | str = "cpu",
    ckpt_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> dict[str, float]:
    """Train `model`'s adapters (or, for the WOUAF-style baseline, its mapping network) and extractor on decoder
    latents (N, ...) -> the last logged metrics."""
    if not isinstance(latents, torch.Tensor) or latents.shape[0] < 1 or not bool(torch.isfinite(latents).all()):
        raise ValueError("latents: expected a finite (N, ...) tensor of decoder latents")
    model.to(device)
    data = latents.to(device)
    with torch.no_grad():
        clean = torch.cat([model.clean(z) for z in data.split(512)])
    objective = _Objective(model, net.to(device), key_split(model.key_bits, config.split_seed), config)
    opt = torch.optim.Adam(model.trainable(), lr=config.lr)

    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(data.device)
        return data[idx], clean[idx]

    result = fit(
        objective,
        lambda m, batch, g: m(*batch, generator=g),
        batches,
        steps=config.steps,
        optimizer=opt,
        lr_schedule=torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=config.lr, total_steps=config.steps),
        device=device,
        generator=torch.Generator().manual_seed(config.seed),
        progress=progress,
        log_every=max(1, config.steps // 10),
        ckpt_dir=ckpt_dir,
        ckpt_every=max(1, config.steps // 4),
    )
    model.eval()
    return {k: float(v) for k, v in result.logs.items()}
