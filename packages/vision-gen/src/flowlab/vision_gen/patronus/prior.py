"""The activation prior: a DDPM over condition vectors (Patronus's s, or DiffAE's code) with a core `TimeMLP`
denoiser, on standardised vectors, for unconditional sampling (sample s, then x | s):

    prior = train_activation_prior(model.condition(train_images), PriorConfig(), device="cpu")
    s = prior.sample(noise)          # noise: (n, m)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.losses import ddpm_loss
from flowlab.core.nets.mlp import TimeMLP
from flowlab.core.schedules import DiscreteVP
from flowlab.core.typing import Prediction
from flowlab.core.validation import check_tensor
from flowlab.vision_gen.kit.sampling import generate
from flowlab.vision_gen.kit.train import fit_with_ema

__all__ = ["ActivationPrior", "PriorConfig", "train_activation_prior"]


@dataclass(frozen=True)
class PriorConfig(Config):
    """The prior's MLP (`depth` hidden layers of `width`) trained `steps` Adam steps of `batch_size` vectors
    (one-cycle to `lr`, EMA), seeded by `seed`; `nonnegative`: clamp samples at 0 (prototype activations are)."""

    width: int = 256
    depth: int = 3
    steps: int = 1500
    batch_size: int = 256
    lr: float = 1e-3
    seed: int = 0
    nonnegative: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("width", "depth", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {getattr(self, name)}")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"lr: expected a positive finite learning rate, got {self.lr}")


class ActivationPrior(nn.Module):
    """A 1-D diffusion over m-vectors: forward(x=(B, m) standardised, t=(B,)) -> epsilon, the kit denoiser
    protocol (`schedule`, `prediction`); `mean`, `std` (m,) undo the standardisation."""

    def __init__(self, dim: int, config: PriorConfig) -> None:
        super().__init__()
        self.config = config
        self.net = TimeMLP(dim, hidden=(config.width,) * config.depth)
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))
        self.schedule, self.prediction = DiscreteVP.linear(), Prediction.EPSILON

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x: (B, m) standardised vectors, t: (B,) core time -> the predicted noise (B, m)."""
        return self.net(x=x, t=t.to(x.dtype))

    def sample(self, noise: torch.Tensor, *, steps: int = 50) -> torch.Tensor:
        """Condition vectors (n, m) from noise (n, m) by deterministic DDIM (eta = 0) in `steps` steps."""
        check_tensor(noise, "noise")
        if noise.dim() != 2 or noise.shape[1] != self.mean.numel():
            raise ValueError(f"noise: expected (n, {self.mean.numel()}), got {tuple(noise.shape)}")
        z = generate(self, noise, steps=steps, method="ddim")
        s = z * self.std + self.mean
        return s.clamp_min(0) if self.config.nonnegative else s


def train_activation_prior(
    activations: torch.Tensor, config: PriorConfig, *, device: torch.device | str = "cpu"
) -> ActivationPrior:
    """The prior fitted to activations (N, m) (e.g. `model.condition(train_images)`): EMA weights, eval mode."""
    check_tensor(activations, "activations")
    if activations.dim() != 2 or activations.shape[0] < 2:
        raise ValueError(f"activations: expected (N, m) with N >= 2, got {tuple(activations.shape)}")
    data = activations.detach().float().to(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        prior = ActivationPrior(data.shape[1], config).to(device)
    prior.mean.copy_(data.mean(0))
    prior.std.copy_(data.std(0).clamp_min(1e-3))
    z = (data - prior.mean) / prior.std

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        return z[torch.randint(0, z.shape[0], (config.batch_size,), generator=g).to(z.device)]

    def loss(net: ActivationPrior, batch: torch.Tensor, g: torch.Generator):
        return ddpm_loss(net, batch, net.schedule, generator=g), {}

    fit_with_ema(prior, loss, batches, steps=config.steps, lr=config.lr, device=device,
                 generator=torch.Generator().manual_seed(config.seed))  # fmt: skip
    return prior.eval()
