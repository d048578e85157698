"""The score model of the certificate: a core UNet1d over concatenated field channels z = (x, y) under the score-SDE
VE schedule (`schedules.VE.score_sde(sigma)`), trained with the core's denoising score-matching loss.

Paper time tau = 1 - t (tau = 0 data). Channels are standardised with the training mean and std of each channel
(buffers), so x and y weigh alike in the likelihood; the network sees c_in z_t with c_in = 1 / sqrt(1 + s(t)^2) and its
output is divided by s(t) (score = -eps_hat / s), which keeps it O(1) at every noise level.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flowlab.core.losses import denoising_score_loss
from flowlab.core.nets import UNet1d
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import VE
from flowlab.core.train import EMA, fit

__all__ = ["EPS", "JointScoreModel", "train_score_model"]

#: the likelihood is integrated from tau = EPS (t = 1 - EPS), as in the paper's code; training draws tau ~ U[EPS, 1]
EPS = 1e-5


class JointScoreModel(nn.Module):
    """s_theta(z_t, t) of standardised fields z: (B, channels, length), a core `UNet1d` under `VE.score_sde(sigma)`.

    `model(x=z, t=t)` is the score in standardised units; `standardise(fields)` maps raw channels there (and
    `log_det` is the log-Jacobian of that map, summed over a sample's dimensions)."""

    def __init__(
        self,
        channels: int,
        length: int,
        *,
        sigma: float = 50.0,
        net_channels: Sequence[int] = (32, 64),
        time_dim: int = 64,
        mean: torch.Tensor | None = None,
        std: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if channels < 1 or length < 1:
            raise ValueError(f"channels, length: expected positive ints, got {channels}, {length}")
        self.config = {
            "channels": channels,
            "length": length,
            "sigma": float(sigma),
            "net_channels": list(net_channels),
            "time_dim": time_dim,
        }
        self.channels, self.length = channels, length
        self.schedule = VE.score_sde(sigma)
        self.path = AffinePath(self.schedule)
        self.net = UNet1d(channels, channels=tuple(net_channels), time_dim=time_dim)
        mean = torch.zeros(channels) if mean is None else torch.as_tensor(mean, dtype=torch.float32).reshape(channels)
        std = torch.ones(channels) if std is None else torch.as_tensor(std, dtype=torch.float32).reshape(channels)
        if not bool((std > 0).all()):
            raise ValueError("std: expected positive per-channel standard deviations")
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def check_fields(self, z: torch.Tensor, name: str = "z") -> None:
        """Raises ValueError (naming `name`) unless z is a finite (B, channels, length) tensor."""
        if not isinstance(z, torch.Tensor) or z.dim() != 3 or tuple(z.shape[1:]) != (self.channels, self.length):
            shape = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
            raise ValueError(f"{name}: expected shape (B, {self.channels}, {self.length}), got {shape}")
        if not bool(torch.isfinite(z).all()):
            raise ValueError(f"{name}: contains NaN or inf values")

    def standardise(self, z: torch.Tensor) -> torch.Tensor:
        """Raw fields (B, C, L) -> standardised fields (B, C, L)."""
        return (z - self.mean[:, None].to(z)) / self.std[:, None].to(z)

    @property
    def log_det(self) -> float:
        """log |d standardise / dz| per sample = -L sum_c log std_c."""
        return float(-self.length * torch.log(self.std).sum())

    def forward(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The score in standardised units, `-net(c_in x, t) / sigma(t)`:
        x: (B, channels, length), t: (B,) -> (B, channels, length)."""
        sigma = self.schedule(t).sigma.to(x.dtype)[:, None, None]
        c_in = torch.rsqrt(1 + sigma**2)
        return -self.net(x=c_in * x, t=t) / sigma


def train_score_model(
    model: JointScoreModel,
    z: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 2e-3,
    ema_decay: float = 0.995,
    device: torch.device | str = "cpu",
    generator: torch.Generator,
    progress: bool = False,
) -> JointScoreModel:
    """Denoising score matching E ||s(t) s_theta(z + s(t) n, t) + n||^2, tau = 1 - t ~ U[EPS, 1], on raw fields
    z: (B, C, L) (standardised here), with AdamW, cosine learning rate and an EMA copied into `model` at the end."""
    model.check_fields(z)
    zs = model.standardise(z.to(device))

    def data(step: int, g: torch.Generator) -> torch.Tensor:
        idx = torch.randint(0, zs.shape[0], (batch_size,), generator=g).to(device)
        return zs[idx]

    def loss_fn(net, batch, g):
        t = (1 - EPS) * torch.rand(batch.shape[0], generator=g).to(device)
        return denoising_score_loss(net, batch, t, model.path, generator=g) / (model.channels * model.length), {}

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    ema = EMA(model, decay=ema_decay, warmup_steps=min(100, steps // 10))
    fit(model, loss_fn, data, steps=steps, optimizer=opt, lr_schedule=sched, ema=ema, device=device,
        generator=generator, progress=progress, log_every=max(1, steps // 5))  # fmt: skip
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(ema.shadow[name])
    return model
