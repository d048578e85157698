"""Tiny denoisers in the core model protocol: a diffusers `UNet2DModel` built from a config (`UNetField`), the
core's `UNet2d` (`CoreUNetField`, optionally conditioned on a vector in every residual block) and the core's patch
DiT (`DiTField`). All take `forward(x=(B, C, H, W), t=(B,) core time)` and carry `schedule` and `prediction`, so the
kit's training, sampling and inversion treat them alike."""

from __future__ import annotations

import torch
from torch import nn

from flowlab.core.nets import DiT
from flowlab.core.nets.labels import check_labels
from flowlab.core.nets.unet import UNet2d
from flowlab.core.schedules import DiscreteVP
from flowlab.core.typing import Prediction

__all__ = ["ClassDiT", "CoreUNetField", "DiTField", "UNetField", "core_unet", "tiny_dit", "tiny_unet"]


def tiny_unet(
    image_size: int,
    in_channels: int = 1,
    *,
    base_channels: int = 32,
    channel_mult: tuple[int, ...] = (1, 2),
    layers_per_block: int = 1,
    num_classes: int | None = None,
    attention: bool = False,
):
    """A small diffusers UNet2DModel (random weights, built offline from a config)."""
    from diffusers import UNet2DModel

    chans = tuple(base_channels * m for m in channel_mult)
    down = tuple("AttnDownBlock2D" if attention and i == len(chans) - 1 else "DownBlock2D" for i in range(len(chans)))
    up = tuple("AttnUpBlock2D" if attention and i == 0 else "UpBlock2D" for i in range(len(chans)))
    return UNet2DModel(
        sample_size=image_size,
        in_channels=in_channels,
        out_channels=in_channels,
        block_out_channels=chans,
        down_block_types=down,
        up_block_types=up,
        layers_per_block=layers_per_block,
        norm_num_groups=min(8, base_channels),
        num_class_embeds=num_classes,
    )


class UNetField(nn.Module):
    """A diffusers UNet as a core model: forward(x=(B,C,H,W), t=(B,) core time, y=None) -> the UNet output.

    The UNet receives the diffusers timestep `schedule.timestep_of(t)` (t = 0 noise -> timestep K - 1).
    """

    def __init__(self, unet: nn.Module, *, schedule: DiscreteVP, prediction: Prediction = Prediction.EPSILON):
        super().__init__()
        self.unet, self.schedule, self.prediction = unet, schedule, Prediction.parse(prediction)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, C, H, W), t: (B,) core time, y: (B,) class labels or None -> the UNet output at timestep
        `schedule.timestep_of(t)`."""
        timestep = self.schedule.timestep_of(t.to(torch.float64)).to(x.dtype)
        return self.unet(x, timestep, class_labels=y).sample


def core_unet(
    image_size: int, in_channels: int = 1, *, base_channels: int = 32, cond_dim: int = 0, cond_mode: str = "add",
    dropout: float = 0.0,
) -> UNet2d:  # fmt: skip
    """The core `UNet2d` at the kit's widths (random weights): channels (base, 2 base) below 16 px, (base, 2 base,
    2 base) from 16 px on, one residual block per level; with `cond_dim > 0` a condition vector (B, cond_dim) enters
    every residual block by `cond_mode` (zero-initialised projections, so it starts as the unconditioned net)."""
    channels = (base_channels, 2 * base_channels) + ((2 * base_channels,) if image_size >= 16 else ())
    return UNet2d(in_channels, channels=channels, cond_dim=cond_dim, cond_mode=cond_mode if cond_dim else "shared",
                  norm_groups=min(8, base_channels), dropout=dropout)  # fmt: skip


class CoreUNetField(nn.Module):
    """A core `UNet2d` as a kit denoiser: forward(x=(B, C, H, W), t=(B,) core time, cond=(B, cond_dim) or None).

    The UNet embeds core time directly (sinusoids of 1000 t, the diffusers timestep scale); class labels are not
    taken (`y` must be None)."""

    def __init__(self, net: UNet2d, *, schedule: DiscreteVP, prediction: Prediction = Prediction.EPSILON):
        super().__init__()
        self.net, self.schedule, self.prediction = net, schedule, Prediction.parse(prediction)

    def forward(
        self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None, cond: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x: (B, C, H, W), t: (B,) core time, cond: (B, cond_dim) for a conditioned UNet -> (B, C, H, W)."""
        if y is not None:
            raise ValueError("y: a CoreUNetField takes no class labels (condition it through cond)")
        return self.net(x=x, t=t, cond=cond)


def tiny_dit(
    image_size: int, in_channels: int = 1, *, patch: int = 2, dim: int = 64, depth: int = 4, heads: int = 4
) -> DiT:
    """A small core DiT (patch `patch`, width `dim`, `depth` adaLN-Zero blocks), random weights."""
    return DiT(image_size, patch, in_channels, dim, depth, heads)


class ClassDiT(nn.Module):
    """A core DiT conditioned on a class label: `net(x=x, t=t, y=y)`, x: (B, C, S, S), t: (B,), y: (B,) int64.

    The label's learned embedding (num_classes + 1 rows; row `num_classes` is the null label of classifier-free
    guidance, used when y is None) enters every adaLN-Zero block beside the time embedding. `time_scale`
    multiplies t inside the sinusoids (1000 for core time in [0, 1]; 250 for EDM's c_noise = ln(sigma) / 4).
    `out_channels` (default in_channels) widens the output, e.g. for a pi-Flow student's policy head.
    """

    def __init__(
        self,
        image_size: int,
        in_channels: int = 1,
        *,
        patch: int = 2,
        dim: int = 64,
        depth: int = 4,
        heads: int = 4,
        num_classes: int = 10,
        time_scale: float = 1000.0,
        out_channels: int | None = None,
    ) -> None:
        super().__init__()
        if not (isinstance(num_classes, int) and num_classes >= 1):
            raise ValueError(f"num_classes: expected a positive int, got {num_classes!r}")
        self.num_classes = num_classes
        self.net = DiT(
            image_size, patch, in_channels, dim, depth, heads, cond_dim=dim, time_scale=time_scale,
            out_channels=out_channels,
        )  # fmt: skip
        self.labels = nn.Embedding(num_classes + 1, dim)

    @property
    def null_label(self) -> int:
        """The null label's index, `num_classes`."""
        return self.num_classes

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, C, S, S), t: (B,), y: (B,) int64 labels (None: the null label) -> (B, out_channels, S, S)."""
        if y is None:
            y = torch.full((x.shape[0],), self.null_label, dtype=torch.long, device=x.device)
        check_labels(y, x.shape[0], self.num_classes, allow_null=True)
        return self.net(x=x, t=t, cond=self.labels(y))


class DiTField(nn.Module):
    """A core DiT (or a `ClassDiT`) as a kit denoiser: forward(x=(B,C,H,W), t=(B,) core time, y=None).

    The DiT embeds core time directly (sinusoids of 1000 t, the diffusers timestep scale). Class labels y: (B,)
    need a `ClassDiT`; a ClassDiT without labels gets the null label."""

    def __init__(self, net: DiT | ClassDiT, *, schedule: DiscreteVP, prediction: Prediction = Prediction.EPSILON):
        super().__init__()
        self.net, self.schedule, self.prediction = net, schedule, Prediction.parse(prediction)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, C, H, W), t: (B,) core time, y: (B,) labels (a `ClassDiT` only) -> the DiT output."""
        if isinstance(self.net, ClassDiT):
            return self.net(x=x, t=t, y=y)
        if y is not None:
            raise ValueError("y: this DiTField is unconditional; class labels need a ClassDiT")
        return self.net(x=x, t=t)
