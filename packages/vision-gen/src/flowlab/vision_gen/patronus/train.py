"""Training the conditioned DDPM jointly with its encoder through the kit's recipe on the core `fit` (Adam
one-cycle, EMA, checkpoint/resume, progress):

    model = train_patronus(ModelConfig(), TrainConfig(steps=2000), images, device="cpu")
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from flowlab.core.train import TrainSettings
from flowlab.vision_gen.kit.train import fit_with_ema
from flowlab.vision_gen.patronus.model import ModelConfig, PatronusModel, patronus_model

__all__ = ["TrainConfig", "check_images", "patronus_loss", "train_patronus"]


@dataclass(frozen=True)
class TrainConfig(TrainSettings):
    """`steps` Adam steps of `batch_size` images (one-cycle to `lr`, EMA `ema_decay`); `seed` draws the weights,
    batches, times and noise. The paper's lr is 1e-5; at 8x8 and a few thousand steps 1e-4 (a deviation)."""

    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-4


def check_images(images: object, size: int, name: str = "images") -> torch.Tensor:
    """`images` if it is a finite float tensor (N, 1, size, size), else a ValueError naming `name`."""
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or tuple(images.shape[1:]) != (1, size, size):
        got = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"{name}: expected (N, 1, {size}, {size}), got {got}")
    if not images.is_floating_point() or not bool(torch.isfinite(images).all()):
        raise ValueError(f"{name}: expected finite floating-point values")
    return images


def patronus_loss(model: PatronusModel, x0: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, dict]:
    """One training step's loss on clean images x0: (B, 1, S, S) (`PatronusModel.loss`), as `fit` calls it."""
    return model.loss(x0, generator=generator)


def train_patronus(
    model_config: ModelConfig,
    config: TrainConfig,
    images: torch.Tensor,
    *,
    device: torch.device | str,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> PatronusModel:
    """The model of `model_config` trained on images (N, 1, S, S) in [-1, 1]: its EMA weights, in eval mode, on
    `device`. With `ckpt_dir` it checkpoints there and resumes from the latest checkpoint."""
    data = check_images(images, model_config.size).to(device)
    device = torch.device(device)
    model = patronus_model(model_config, seed=config.seed).to(device)
    if model_config.variant == "patronus" and model_config.proto_init == "patches":
        model.prototype_encoder.init_from_patches(data, torch.Generator().manual_seed(config.seed))

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        return data[torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(device)]

    fit_with_ema(
        model,
        patronus_loss,
        batches,
        steps=config.steps,
        lr=config.lr,
        ema_decay=config.ema_decay,
        device=device,
        generator=torch.Generator().manual_seed(config.seed),
        progress=progress,
        ckpt_dir=ckpt_dir,
    )
    return model.eval()
