"""The SFBD-OMNI configuration and its posterior model: a conditional bridge u_theta(x | y) from the observation's
image part (t = 0) to the clean image (t = 1), an MLP over flattened images that sees the whole observation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.nets import TimeMLP
from flowlab.core.nets.seeding import seeded_init
from flowlab.core.paths.bridge import AugmentedBridgePath

__all__ = ["BridgePosterior", "ImageMLP", "SFBDConfig"]


@dataclass(frozen=True)
class SFBDConfig(Config):
    """The alternating loop: `pretrain_steps` on the clean set (on the observations' image part when there is none),
    then `rounds` of reconstruct -> retrain for `steps_per_round` (Adam at `lr`, one-cycle, EMA `ema_decay`, batches
    of `batch_size` from the pool mixed with the clean set at `clean_weight` = lambda / (1 + lambda); None: 0 for an
    identifiable corruption, 0.2 otherwise), every pair re-corrupted freshly. `online_gamma` switches to the online
    variant: one run of rounds * steps_per_round steps without optimiser resets, refreshing that share of the pool
    `refreshes_per_round` times a round (clean weight 0.2 unless set). The bridge: diffusion `sigma`, source noise
    `source_noise` on y, `sampler_steps` exact bridge steps; an MLP of widths `hidden`."""

    rounds: int = 4
    pretrain_steps: int = 100
    steps_per_round: int = 500
    batch_size: int = 256
    lr: float = 2e-3
    ema_decay: float = 0.995
    clean_weight: float | None = None
    online_gamma: float | None = None
    refreshes_per_round: int = 10
    sigma: float = 0.3
    source_noise: float = 0.05
    sampler_steps: int = 30
    hidden: tuple[int, ...] = (256, 256, 256)
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("rounds", "pretrain_steps", "steps_per_round"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 0):
                raise ValueError(f"{name}: expected a non-negative int, got {value!r}")
        for name in ("batch_size", "sampler_steps", "refreshes_per_round"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if self.clean_weight is not None and not 0 <= self.clean_weight < 1:
            raise ValueError(f"clean_weight: expected a weight in [0, 1) or None, got {self.clean_weight!r}")
        if self.online_gamma is not None and not 0 < self.online_gamma <= 1:
            raise ValueError(f"online_gamma: expected a refresh share in (0, 1] or None, got {self.online_gamma!r}")
        for name in ("lr", "sigma"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: expected a positive number, got {value!r}")
        if not (math.isfinite(self.source_noise) and self.source_noise >= 0):
            raise ValueError(f"source_noise: expected a non-negative number, got {self.source_noise!r}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay: expected a decay in [0, 1), got {self.ema_decay!r}")

    def weight_for(self, identifiable: bool) -> float:
        """The clean weight lambda / (1 + lambda) this run uses for a corruption of that identifiability."""
        if self.clean_weight is not None:
            return self.clean_weight
        return 0.2 if self.online_gamma is not None or not identifiable else 0.0

    def path(self) -> AugmentedBridgePath:
        """The augmented bridge path of `sigma` and `source_noise`."""
        return AugmentedBridgePath(self.sigma, source_noise=self.source_noise)


class BridgePosterior(nn.Module):
    """u_theta(x | y): predicts the clean endpoint as a residual, x_1 = x_t + net(x_t, t, y), and returns the bridge
    drift (x_1 - x_t) / (1 - t) (the residual keeps a posterior near its observation local, as EDM's skip does).
    x: (B, C, H, W) the bridge state, t: (B,), obs: (B, C_y, H, W) the whole observation."""

    def __init__(self, image_shape: tuple[int, int, int], obs_channels: int, *, hidden: tuple[int, ...], seed: int):
        super().__init__()
        self.image_shape = tuple(int(s) for s in image_shape)
        self.obs_shape = (int(obs_channels), *self.image_shape[1:])
        with seeded_init(seed):
            self.net = TimeMLP(math.prod(self.image_shape), cond_dim=math.prod(self.obs_shape), hidden=hidden)

    def _check(self, x: torch.Tensor, obs: torch.Tensor) -> None:
        if tuple(x.shape[1:]) != self.image_shape:
            raise ValueError(f"x: expected images of shape {self.image_shape}, got {tuple(x.shape[1:])}")
        if tuple(obs.shape[1:]) != self.obs_shape or obs.shape[0] != x.shape[0]:
            raise ValueError(f"obs: expected ({x.shape[0]}, {', '.join(map(str, self.obs_shape))}), got "
                             f"{tuple(obs.shape)}")  # fmt: skip

    def endpoint(self, *, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """The predicted clean image E[x_1 | x_t, y]: (B, C, H, W)."""
        self._check(x, obs)
        return x + self.net(x=x.flatten(1), t=t, cond=obs.flatten(1)).view(x.shape)

    def forward(
        self, *, x: torch.Tensor, t: torch.Tensor, obs: torch.Tensor, y: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The drift (B, C, H, W); `y`, the bridge's start that `bridge_loss` also passes, is part of obs."""
        remaining = (1 - t).clamp_min(1e-4).view(-1, *([1] * (x.dim() - 1)))
        return (self.endpoint(x=x, t=t, obs=obs) - x) / remaining


class ImageMLP(nn.Module):
    """An unconditional field on images: `net(x=x, t=t)` with x: (B, C, H, W), t: (B,) -> (B, C, H, W), an MLP over
    the flattened image (the evaluation generators and the SFBD baseline's EDM denoiser)."""

    def __init__(self, image_shape: tuple[int, int, int], *, hidden: tuple[int, ...], seed: int) -> None:
        super().__init__()
        self.image_shape = tuple(int(s) for s in image_shape)
        with seeded_init(seed):
            self.net = TimeMLP(math.prod(self.image_shape), hidden=hidden)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x: (B, C, H, W) of `image_shape`, t: (B,) -> (B, C, H, W), through the MLP on the flattened image."""
        if tuple(x.shape[1:]) != self.image_shape:
            raise ValueError(f"x: expected images of shape {self.image_shape}, got {tuple(x.shape[1:])}")
        return self.net(x=x.flatten(1), t=t).view(x.shape)
