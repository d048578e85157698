"""Tiny denoisers in the core model protocol: a diffusers `UNet2DModel` built from a config (`UNetField`) and the
core's patch DiT (`DiTField`). Both take `forward(x=(B, C, H, W), t=(B,) core time)` and carry `schedule` and
`prediction`, so the kit's training, sampling and inversion treat them alike."""

from __future__ import annotations

import torch
from torch import nn

from flowlab.core.nets import DiT
from flowlab.core.schedules import DiscreteVP
from flowlab.core.typing import Prediction

__all__ = ["DiTField", "UNetField", "tiny_dit", "tiny_unet"]


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
        timestep = self.schedule.timestep_of(t.to(torch.float64)).to(x.dtype)
        return self.unet(x, timestep, class_labels=y).sample


def tiny_dit(
    image_size: int, in_channels: int = 1, *, patch: int = 2, dim: int = 64, depth: int = 4, heads: int = 4
) -> DiT:
    """A small core DiT (patch `patch`, width `dim`, `depth` adaLN-Zero blocks), random weights."""
    return DiT(image_size, patch, in_channels, dim, depth, heads)


class DiTField(nn.Module):
    """A core DiT as a kit denoiser: forward(x=(B,C,H,W), t=(B,) core time, y=None) -> net(x=x, t=t).

    The DiT embeds core time directly (sinusoids of 1000 t, the diffusers timestep scale); it is unconditional."""

    def __init__(self, net: DiT, *, schedule: DiscreteVP, prediction: Prediction = Prediction.EPSILON):
        super().__init__()
        self.net, self.schedule, self.prediction = net, schedule, Prediction.parse(prediction)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        if y is not None:
            raise ValueError("y: DiTField is unconditional; class labels need the UNet (num_classes)")
        return self.net(x=x, t=t)
