"""The MOLM model: a frozen decoder carrying key-routed LoRA markers, and the bit extractor that reads keys back.

model = MolmModel(decoder, MolmConfig())            # decoder: the kit's tiny digits decoder (or any nn.Module)
images = model.mark(z, keys)                         # (B, 1, 16, 16) in [-1, 1], watermarked by keys (B, M)
logits = model.extractor(to_unit(images))            # (B, M): bit m is 1 where logits[:, m] > 0
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.vision_gen.kit.autoencoder import group_norm
from flowlab.vision_gen.watermark.molm.markers import DIGITS_BLOCKS, MarkerSet

__all__ = ["BitExtractor", "MolmConfig", "MolmModel", "key_split", "sample_keys"]


@dataclass(frozen=True)
class MolmConfig(Config):
    """Markers: `num_adapters` (P, a power of two) rank-`rank` adapters scaled alpha / rank in each of `blocks`;
    extractor: a 3-conv CNN of `width` channels on `channels`-channel `size` x `size` images."""

    blocks: tuple[str, ...] = DIGITS_BLOCKS
    num_adapters: int = 4
    rank: int = 4
    alpha: float = 4.0
    width: int = 32
    channels: int = 1
    size: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.blocks:
            raise ValueError("blocks: expected at least one block name")
        if self.num_adapters < 2 or self.num_adapters & (self.num_adapters - 1):
            raise ValueError(f"num_adapters: expected a power of two >= 2, got {self.num_adapters!r}")
        for name in ("rank", "width", "channels"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive int, got {getattr(self, name)!r}")
        if self.size < 4 or self.size % 4:
            raise ValueError(f"size: expected a multiple of 4, got {self.size!r}")
        if not self.alpha > 0:
            raise ValueError(f"alpha: expected a scale > 0, got {self.alpha!r}")

    @property
    def key_bits(self) -> int:
        """M = L log2(P)."""
        return len(self.blocks) * (self.num_adapters.bit_length() - 1)


class BitExtractor(nn.Module):
    """images (B, C, S, S) in [0, 1] -> (B, bits) logits: three norm-SiLU convs (the last two stride 2) and a linear
    read-out of the (S/4 x S/4) feature map."""

    def __init__(self, bits: int, *, channels: int = 1, size: int = 16, width: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1), group_norm(width), nn.SiLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), group_norm(2 * width), nn.SiLU(),
            nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1), group_norm(2 * width), nn.SiLU(),
            nn.Flatten(), nn.Linear(2 * width * (size // 4) ** 2, bits),
        )  # fmt: skip

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, S, S) in [0, 1] -> (B, bits) logits."""
        return self.net(2 * images - 1)


class MolmModel(nn.Module):
    """`decoder` (frozen, adapters attached in place) + its MarkerSet + a BitExtractor."""

    def __init__(self, decoder: nn.Module, config: MolmConfig) -> None:
        super().__init__()
        self.config = config
        self.decoder = decoder
        self.markers = MarkerSet.attach(decoder, config.blocks, num_adapters=config.num_adapters, rank=config.rank,
                                        alpha=config.alpha)  # fmt: skip
        self.extractor = BitExtractor(config.key_bits, channels=config.channels, size=config.size, width=config.width)

    @property
    def key_bits(self) -> int:
        """M, the key length the markers route."""
        return self.markers.key_bits

    def mark(self, z: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Decode latents z (B, ...) with each sample's key (B, M) routing the adapters -> (B, C, S, S)."""
        self.markers.route(keys.to(z.device))
        try:
            return self.decoder(z)
        finally:
            self.markers.off()

    def clean(self, z: torch.Tensor) -> torch.Tensor:
        """The frozen decoder's output (adapters off): (B, ...) -> (B, C, S, S)."""
        self.markers.off()
        return self.decoder(z)

    def trainable(self) -> list[nn.Parameter]:
        """The adapters and the extractor (the decoder stays frozen)."""
        return [*self.markers.adapter_parameters(), *self.extractor.parameters()]


def key_split(bits: int, seed: int) -> torch.Tensor:
    """A random non-zero parity vector (bits,) splitting the 2**bits keys in halves: keys k with k . r = 0 (mod 2)
    are training keys, the others held out."""
    g = torch.Generator().manual_seed(seed)
    r = torch.randint(0, 2, (bits,), generator=g)
    if not bool(r.any()):
        r[0] = 1
    return r


def sample_keys(n: int, parity: torch.Tensor, half: int, *, generator: torch.Generator) -> torch.Tensor:
    """n uniform keys (n, bits) of one half of the split (`half` 0: training keys, 1: held-out), long."""
    keys = torch.randint(0, 2, (n, parity.numel()), generator=generator)
    wrong = (keys @ parity) % 2 != half
    first = int(torch.nonzero(parity)[0])
    keys[wrong, first] ^= 1
    return keys
