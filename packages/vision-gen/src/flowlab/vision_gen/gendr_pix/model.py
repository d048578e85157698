"""The networks of GenDR-Pix at toy scale: one conv body shape for every super-resolution net, the latent teacher
(the GenDR stand-in, on the kit's tiny autoencoder), the pixel students (stage I: pixels in, latents out; stage II,
the naive removal and the ESPCN-like floor: pixels in, pixels out) and the feature discriminator.

Every model maps an upsampled low-quality image x_up (B, 3, H, W) in [-1, 1] (bicubic x`scale` of the LQ input) and
a condition c (B,) (0: the positive prompt, "a sharp photo"; 1: the negative one, "a blurry photo") to a
high-quality image of the same size; H and W are multiples of the shuffle factor r (the autoencoder's
downsampling). The condition stands in for GenDR's text prompts so that PadCFG has a negative branch.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.config import Config
from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder
from flowlab.vision_gen.kit.degrade import DegradationConfig

__all__ = [
    "NEGATIVE",
    "POSITIVE",
    "FeatureDiscriminator",
    "GenDRConfig",
    "LatentTeacher",
    "PixelSR",
    "ResidualBlock",
    "SRNet",
    "StageOne",
]

#: the two conditions
POSITIVE, NEGATIVE = 0, 1


def _autoencoder_default() -> AutoencoderConfig:
    """The photo autoencoder of the teacher: RGB, x4 with 8 latent channels (32x32 training crops -> 8 x 8 x 8
    latents, 6x fewer numbers), KL, 2500 steps of batch 32. Trained at the SR crop size: its GroupNorms do not carry
    over between sizes (trained on 16x16 crops, one reached 31.4 dB PSNR on 16x16 test crops and 20.6 dB on 64x64)."""
    return AutoencoderConfig(size=32, in_channels=3, latent_channels=8, channels=(16, 32, 32), dataset="photos",
                             steps=2500, batch_size=32)  # fmt: skip


@dataclass(frozen=True)
class GenDRConfig(Config):
    """The nets (`width` channels, `blocks` residual blocks, at the latent resolution), the data (LQ-HQ pairs from
    `pairs` HR crops of `crop` px of the train photos, degraded by `degradation`, whose scale is the SR factor) and
    the training of every stage (`batch_size`, Adam at `lr`; steps per stage; the naive removal and the ESPCN floor
    get stage1 + stage2 steps). Stage II loss: L1 + `gan_weight` GAN (on `rand_pad`ded images) + `perceptual_weight`
    L_P (L1 between the autoencoder encoder's latents) + `fourier_weight` masked Fourier loss on the grid bins and
    their neighbours within `fourier_radius` (`fourier`: on or off); stage I: latent L1 + `gan_weight` GAN.
    `negative_share`: the share of each batch trained under the negative condition (target: the teacher's output
    under it, for the teacher: the encoded x_up). `cfg_weight`: PadCFG's omega at inference.

    The paper's (0.05, 1, 0.1) weights [unverified] mask the x8 grid's neighbourhoods on 512 px crops, where one bin
    is 1/64 of the grid spacing; on 32 px crops with x4 one bin is 1/8 of it, so radius 0 is the narrow mask here,
    and our loss is a per-bin mean, not the paper's normalisation. Radius 0 at weight 10 is what lowered the artifact
    energy below the naive removal's on held-out crops (RESULTS.md, which also gives the paper's setting)."""

    autoencoder: AutoencoderConfig = field(default_factory=_autoencoder_default)
    degradation: DegradationConfig = field(default_factory=DegradationConfig)
    width: int = 64
    blocks: int = 4
    crop: int = 32
    pairs: int = 4096
    batch_size: int = 32
    lr: float = 1e-3
    teacher_steps: int = 600
    stage1_steps: int = 300
    stage2_steps: int = 300
    gan_weight: float = 0.05
    perceptual_weight: float = 1.0
    fourier_weight: float = 10.0
    fourier_radius: int = 0
    rand_pad: bool = True
    fourier: bool = True
    negative_share: float = 0.1
    cfg_weight: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("width", "blocks", "crop", "pairs", "batch_size", "teacher_steps", "stage1_steps",
                     "stage2_steps"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive int, got {getattr(self, name)!r}")
        if self.autoencoder.in_channels != 3 or self.autoencoder.downsample < 2:
            raise ValueError(f"autoencoder: expected an RGB autoencoder downsampling by >= 2, got {self.autoencoder!r}")
        if self.crop % (self.factor * self.degradation.scale):
            raise ValueError(f"crop: expected a multiple of the shuffle factor {self.factor} times the SR scale "
                             f"{self.degradation.scale}, got {self.crop}")  # fmt: skip
        for name in ("lr", "gan_weight", "perceptual_weight", "fourier_weight", "cfg_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0) or (name == "lr" and value == 0):
                raise ValueError(f"{name}: expected a finite number >= 0 (lr > 0), got {value!r}")
        if isinstance(self.fourier_radius, bool) or not isinstance(self.fourier_radius, int) or self.fourier_radius < 0:
            raise ValueError(f"fourier_radius: expected an int >= 0, got {self.fourier_radius!r}")
        if not 0 <= self.negative_share < 1:
            raise ValueError(f"negative_share: expected a share in [0, 1), got {self.negative_share!r}")

    @property
    def factor(self) -> int:
        """The pixel-(un)shuffle factor r: the autoencoder's downsampling."""
        return self.autoencoder.downsample

    @property
    def scale(self) -> int:
        """The super-resolution factor."""
        return self.degradation.scale


class ResidualBlock(nn.Module):
    """(B, c, H, W) -> (B, c, H, W): x + 0.1 conv(SiLU(conv(x))), EDSR's block: no normalisation, so that the output
    at a pixel does not depend on the size of the image around it."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, c, H, W) -> `x + 0.1 body(x)`: (B, c, H, W)."""
        return x + 0.1 * self.body(x)


class SRNet(nn.Module):
    """(B, in_channels, h, w), c (B,) -> (B, out_channels, h, w): conv in, plus a learned per-condition shift, then
    `blocks` residual blocks of `width` channels (`features`), then SiLU-conv out (zero-initialised with
    `zero_out`)."""

    def __init__(self, in_channels: int, out_channels: int, width: int, blocks: int, *, zero_out: bool = False):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, width, 3, padding=1)
        self.condition = nn.Embedding(2, width)
        nn.init.zeros_(self.condition.weight)
        self.body = nn.Sequential(*(ResidualBlock(width) for _ in range(blocks)))
        self.head = nn.SiLU()
        self.conv_out = nn.Conv2d(width, out_channels, 3, padding=1)
        if zero_out:
            nn.init.zeros_(self.conv_out.weight)
            nn.init.zeros_(self.conv_out.bias)

    def features(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """(B, in_channels, h, w), c (B,) -> (B, width, h, w): the body's output."""
        return self.body(self.conv_in(x) + self.condition(c)[:, :, None, None])

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """x: (B, in_channels, h, w), c: (B,) -> (B, out_channels, h, w)."""
        return self.conv_out(self.head(self.features(x, c)))

    def with_ends(self, in_channels: int, out_channels: int, *, zero_out: bool = False) -> SRNet:
        """A trainable copy (whether or not this net is frozen) sharing none of its tensors, its body and condition
        kept, a fresh conv in (unless the channels match) and conv out (unless they match and not `zero_out`)."""
        net = copy.deepcopy(self).train().requires_grad_(True)
        width = self.conv_in.out_channels
        if in_channels != self.conv_in.in_channels:
            net.conv_in = nn.Conv2d(in_channels, width, 3, padding=1)
        if out_channels != self.conv_out.out_channels or zero_out:
            net.conv_out = nn.Conv2d(width, out_channels, 3, padding=1)
            if zero_out:
                nn.init.zeros_(net.conv_out.weight)
                nn.init.zeros_(net.conv_out.bias)
        return net


def _frozen(module: nn.Module) -> nn.Module:
    return module.eval().requires_grad_(False)


class LatentTeacher(nn.Module):
    """The GenDR stand-in: z = E(x_up) (posterior mode, scaled), z_hq = z + net(z, c), y = D(z_hq); E and D the
    frozen kit autoencoder (with a zero-initialised net's conv out it starts as the autoencoder's reconstruction)."""

    def __init__(self, autoencoder: TinyAutoencoder, net: SRNet) -> None:
        super().__init__()
        self.autoencoder = _frozen(autoencoder)
        self.net = net

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 3, H, W) -> the scaled latent mode (B, latent_channels, H / r, W / r)."""
        return self.autoencoder.encode(x).latent_dist.mode() * self.autoencoder.config.scaling_factor

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """A scaled latent (B, latent_channels, h, w) -> pixels (B, 3, r h, r w)."""
        return self.autoencoder.decode(z / self.autoencoder.config.scaling_factor).sample

    def latent(self, x_up: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The restored latent `z + net(z, c)` with z = E(x_up): x_up: (B, C, H, W), c: (B,) -> the latents of
        `encode`'s shape."""
        z = self.encode(x_up)
        return z + self.net(z, c)

    def forward(self, x_up: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The restored image D(`latent(x_up, c)`): x_up: (B, C, H, W), c: (B,) -> (B, C, H, W)."""
        return self.decode(self.latent(x_up, c))


class StageOne(nn.Module):
    """Stage I (encoder removed): z_hq = net(unshuffle_r(x_up), c), y = D(z_hq) with the teacher's frozen decoder."""

    def __init__(self, teacher: LatentTeacher, net: SRNet) -> None:
        super().__init__()
        self.autoencoder = _frozen(teacher.autoencoder)
        self.net = net
        self.factor = teacher.autoencoder.settings.downsample

    def latent(self, x_up: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The latent `net(unshuffle_r(x_up), c)`, no encoder: x_up: (B, C, H, W), c: (B,) -> the teacher's latent
        shape."""
        return self.net(F.pixel_unshuffle(x_up, self.factor), c)

    def forward(self, x_up: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The image `latent(x_up, c)` through the frozen decoder: x_up: (B, C, H, W), c: (B,) -> (B, C, H, W)."""
        return self.autoencoder.decode(self.latent(x_up, c) / self.autoencoder.config.scaling_factor).sample


class PixelSR(nn.Module):
    """Stage II, the naive removal and the ESPCN-like floor (no autoencoder): y = x_up + shuffle_r(net(unshuffle_r
    (x_up), c)); with a zero-initialised conv out it starts as the bicubic upsampling."""

    def __init__(self, net: SRNet, factor: int) -> None:
        super().__init__()
        self.net = net
        self.factor = factor

    def forward(self, x_up: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """The image `x_up + shuffle_r(net(unshuffle_r(x_up), c))`: x_up: (B, C, H, W), c: (B,) -> (B, C, H, W)."""
        return x_up + F.pixel_shuffle(self.net(F.pixel_unshuffle(x_up, self.factor), c), self.factor)


class FeatureDiscriminator(nn.Module):
    """Patch logits (B, 1, h, w) by a trainable conv head on the frozen `backbone`'s features (an `SRNet`, condition
    positive) of its input: latents as they are, pixels pixel-unshuffled by `unshuffle` first (> 1)."""

    def __init__(self, backbone: SRNet, *, unshuffle: int = 1) -> None:
        super().__init__()
        self.backbone = _frozen(copy.deepcopy(backbone))
        self.unshuffle = unshuffle
        width = backbone.conv_in.out_channels
        self.head = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.SiLU(), nn.Conv2d(width, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, ...) latents or pixels -> patch logits (B, 1, h, w), the backbone's features under the positive
        condition."""
        x = F.pixel_unshuffle(x, self.unshuffle) if self.unshuffle > 1 else x
        c = torch.full((x.shape[0],), POSITIVE, dtype=torch.long, device=x.device)
        return self.head(self.backbone.features(x, c))
