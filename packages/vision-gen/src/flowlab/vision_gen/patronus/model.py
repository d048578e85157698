"""The conditioned DDPM: an encoder of the clean image (Patronus's prototype encoder, or the DiffAE-style global
encoder) and the core `UNet2d` (the kit's `core_unet` widths) whose every residual block adds its own projection of
the embedded condition, h <- h + W_t SiLU(t_emb) + W_s SiLU(s_emb) (`cond_mode="add"`, the official variant).

    model = patronus_model(ModelConfig(size=8, num_prototypes=16), seed=0)
    s = model.condition(x0)                      # (B, m) from the clean images
    eps = model.field(x=x_t, t=t, cond=s)        # the kit denoiser protocol: `generate(model.field, ..., cond=s)`
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.losses import ddpm_loss
from flowlab.core.schedules import DiscreteVP
from flowlab.vision_gen.kit.nets import CoreUNetField, core_unet
from flowlab.vision_gen.patronus.encoder import GlobalEncoder, PrototypeEncoder
from flowlab.vision_gen.patronus.names import PROTO_INITS, VARIANTS

__all__ = ["ModelConfig", "PatronusModel", "patronus_model"]


@dataclass(frozen=True)
class ModelConfig(Config):
    """A `variant` on `size` x `size` one-channel images: the encoder's conv stack (`enc_channels`, `enc_kernels`,
    `enc_strides`, `enc_paddings`) to `num_prototypes` prototypes (Patronus) or a code of that dimension (DiffAE);
    the UNet of `base_channels` (`core_unet`); the distinctiveness loss at `distinct_weight` with `margin`;
    `proto_init`: prototypes drawn from U(0, 1) ("uniform", the official init) or set to the features of random
    training patches before training ("patches")."""

    variant: str = "patronus"
    size: int = 8
    num_prototypes: int = 16
    enc_channels: tuple[int, ...] = (32, 32, 32)
    enc_kernels: tuple[int, ...] = (3, 1, 1)
    enc_strides: tuple[int, ...] = (1, 1, 1)
    enc_paddings: tuple[int, ...] = (0, 0, 0)
    base_channels: int = 16
    distinct_weight: float = 0.0
    margin: float = 0.2
    proto_init: str = "patches"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"variant: expected one of {VARIANTS}, got {self.variant!r}")
        if self.size not in (8, 16, 32):
            raise ValueError(f"size: expected 8, 16 or 32, got {self.size}")
        for name in ("num_prototypes", "base_channels"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {getattr(self, name)}")
        stack = (self.enc_channels, self.enc_kernels, self.enc_strides, self.enc_paddings)
        if not len({len(v) for v in stack}) == 1 or not self.enc_channels:
            raise ValueError("enc_channels, enc_kernels, enc_strides, enc_paddings: expected one equal length >= 1")
        if min(self.enc_channels + self.enc_kernels + self.enc_strides) < 1 or min(self.enc_paddings) < 0:
            raise ValueError("enc_*: expected channels, kernels, strides >= 1 and paddings >= 0")
        if self.proto_init not in PROTO_INITS:
            raise ValueError(f"proto_init: expected one of {PROTO_INITS}, got {self.proto_init!r}")
        if not (0 <= self.distinct_weight < math.inf and 0 < self.margin <= 1):
            raise ValueError(f"distinct_weight, margin: expected a finite weight >= 0 and a margin in (0, 1], got "
                             f"{self.distinct_weight}, {self.margin}")  # fmt: skip


class PatronusModel(nn.Module):
    """`encoder` (a `PrototypeEncoder` or a `GlobalEncoder`) and `field` (a kit `CoreUNetField` whose UNet takes
    the m-vector in every residual block); the linear 1000-step DDPM schedule, epsilon prediction."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        stack = {"channels": config.enc_channels, "kernels": config.enc_kernels, "strides": config.enc_strides,
                 "paddings": config.enc_paddings}  # fmt: skip
        m = config.num_prototypes
        if config.variant == "patronus":
            self.encoder = PrototypeEncoder(1, config.size, num_prototypes=m, **stack)
        else:
            self.encoder = GlobalEncoder(1, config.size, dim=m, **stack)
        net = core_unet(config.size, 1, base_channels=config.base_channels, cond_dim=m, cond_mode="add")
        self.field = CoreUNetField(net, schedule=DiscreteVP.linear())

    @property
    def schedule(self) -> DiscreteVP:
        """The denoiser's DDPM schedule."""
        return self.field.schedule

    @property
    def prototype_encoder(self) -> PrototypeEncoder:
        """The prototype encoder (a ValueError for the DiffAE variant, which has none)."""
        if not isinstance(self.encoder, PrototypeEncoder):
            raise ValueError(f"model: the {self.config.variant} variant has no prototypes")
        return self.encoder

    def condition(self, x0: torch.Tensor) -> torch.Tensor:
        """The condition vector (B, m) of clean images x0: (B, 1, S, S): prototype activations s, or the code."""
        out = self.encoder(x0)
        return out.s if isinstance(self.encoder, PrototypeEncoder) else out

    def loss(self, x0: torch.Tensor, *, generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict]:
        """The DDPM epsilon loss on x0: (B, 1, S, S) with the condition computed from x0 itself (never from x_t),
        trained end to end into the encoder, plus the weighted distinctiveness loss; and its logs."""
        cond = self.condition(x0)
        regression = ddpm_loss(self.field, x0, self.schedule, generator=generator, cond=cond)
        logs = {"regression": regression.detach()}
        if self.config.distinct_weight and isinstance(self.encoder, PrototypeEncoder):
            distinct = self.encoder.distinct_loss(self.config.margin)
            logs["distinct"] = distinct.detach()
            return regression + self.config.distinct_weight * distinct, logs
        return regression, logs


def patronus_model(config: ModelConfig, *, seed: int = 0) -> PatronusModel:
    """The model of `config` with weights drawn from `seed` (torch's global generator is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return PatronusModel(config)
