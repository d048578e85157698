"""MOLM's baselines, trained with its objective and training attacks:

- HiDDeN-lite, a post-hoc watermark: an encoder adds a bounded residual, computed from the image and the key, to a
  finished image; a BitExtractor reads the key back. Trained over random keys (no per-key cost).
- Stable-Signature-style: the whole decoder fine-tuned for one fixed key against a frozen extractor (HiDDeN-lite's),
  so every new key costs a training run (`finetune_for_key` times it).
- WOUAF-style weight modulation (simplified), the closest competitor without per-key training: a mapping network
  takes the key to a scale of every decoder conv's weights; trained by `train_molm` like MOLM itself.
"""

from __future__ import annotations

import copy
import time
from functools import partial

import torch
from torch import nn

from flowlab.core.train import fit
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet
from flowlab.vision_gen.watermark.molm.model import BitExtractor
from flowlab.vision_gen.watermark.molm.objective import random_attack, watermark_loss
from flowlab.vision_gen.watermark.molm.train import TrainConfig

__all__ = ["HiddenLite", "WouafLite", "finetune_for_key", "train_hidden"]


class HiddenLite(nn.Module):
    """embed: images (B, 1, S, S) in [-1, 1], keys (B, M) -> images + strength tanh(conv net([image, key maps]));
    extractor: a BitExtractor."""

    def __init__(self, bits: int, *, size: int = 16, width: int = 32, strength: float = 0.3) -> None:
        super().__init__()
        self.bits, self.strength = bits, strength
        self.encoder = nn.Sequential(
            nn.Conv2d(1 + bits, width, 3, padding=1), nn.SiLU(), nn.Conv2d(width, width, 3, padding=1), nn.SiLU(),
            nn.Conv2d(width, 1, 3, padding=1),
        )  # fmt: skip
        self.extractor = BitExtractor(bits, size=size, width=width)

    def embed(self, images: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """(B, 1, S, S) in [-1, 1], keys (B, M) bits -> watermarked (B, 1, S, S)."""
        maps = (2 * keys.float() - 1)[:, :, None, None].expand(-1, -1, *images.shape[-2:])
        return images + self.strength * torch.tanh(self.encoder(torch.cat([images, maps], 1)))


def _fit(module: nn.Module, loss, batches, params, config: TrainConfig, device) -> None:
    opt = torch.optim.Adam(params, lr=config.lr)
    fit(module, loss, batches, steps=config.steps, optimizer=opt,
        lr_schedule=torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=config.lr, total_steps=config.steps),
        device=device, generator=torch.Generator().manual_seed(config.seed), progress=False,
        log_every=max(1, config.steps // 5))  # fmt: skip


def train_hidden(
    clean: torch.Tensor, bits: int, config: TrainConfig, net: DigitsFeatureNet, *, device: torch.device | str = "cpu"
) -> HiddenLite:
    """A HiddenLite trained on clean decodes (N, 1, S, S) in [-1, 1] with uniformly random keys (eval mode)."""
    torch.manual_seed(config.seed)
    hidden = HiddenLite(bits, size=clean.shape[-1]).to(device)
    data, net = clean.to(device), net.to(device)

    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(data.device)
        return data[idx], torch.randint(0, 2, (config.batch_size, bits), generator=g).to(data.device)

    def loss(model: HiddenLite, batch, g: torch.Generator):
        x, keys = batch
        marked = model.embed(x, keys)
        return watermark_loss(model.extractor(random_attack((marked + 1) / 2, g)), keys, marked, x, net, config.lam)

    _fit(hidden, loss, batches, hidden.parameters(), config, device)
    return hidden.eval().requires_grad_(False)


class _KeyedDecoder(nn.Module):
    """A trainable decoder copy and a frozen extractor: (z, clean) -> (loss, logs) for one fixed key."""

    def __init__(self, decoder: nn.Module, extractor: nn.Module, key: torch.Tensor, net, lam: float) -> None:
        super().__init__()
        self.decoder, self.extractor, self.net, self.lam = decoder, extractor, net, lam
        self.register_buffer("key", key.long().view(1, -1))

    def forward(self, z: torch.Tensor, clean: torch.Tensor, generator: torch.Generator):
        marked = self.decoder(z)
        keys = self.key.expand(z.shape[0], -1)
        logits = self.extractor(random_attack((marked + 1) / 2, generator))
        return watermark_loss(logits, keys, marked, clean, self.net, self.lam)


def finetune_for_key(
    decoder: nn.Module,
    extractor: nn.Module,
    key: torch.Tensor,
    latents: torch.Tensor,
    config: TrainConfig,
    net: DigitsFeatureNet,
    *,
    device: torch.device | str = "cpu",
) -> tuple[nn.Module, float]:
    """A copy of `decoder` fine-tuned (all weights) so the frozen `extractor` reads `key` (M,) from its outputs on
    latents (N, ...) -> (the fine-tuned decoder in eval mode, training seconds)."""
    start = time.perf_counter()
    tuned = copy.deepcopy(decoder).requires_grad_(True).to(device)
    data = latents.to(device)
    with torch.no_grad():
        clean = torch.cat([decoder.to(device)(z) for z in data.split(512)])
    module = _KeyedDecoder(tuned, extractor.requires_grad_(False), key.to(device), net.to(device), config.lam)

    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(data.device)
        return data[idx], clean[idx]

    _fit(module, lambda m, b, g: m(*b, generator=g), batches, tuned.parameters(), config, device)
    return tuned.eval().requires_grad_(False), time.perf_counter() - start


class WouafLite(nn.Module):
    """WOUAF-style weight modulation of a frozen `decoder` (simplified: the decoder is not fine-tuned, no
    demodulation). A mapping MLP takes a key (B, M) to one scale vector per nn.Conv2d of the decoder, and each conv's
    weights are modulated along their input channels, W_b[o, i] = W[o, i] (1 + s_b[i]): sample b is decoded by its
    key's weights. That conv equals the frozen conv applied to its input scaled per channel (zero padding stays zero),
    which is how it is computed, batched, with no per-sample weight copies. The mapping's last layer starts at zero,
    so a fresh model decodes exactly as the frozen decoder, as it does whenever no key is set. A new key is a new
    input to the mapping, never a training run. Same interface as `MolmModel` (mark, clean, extractor, trainable,
    key_bits), so `train_molm` trains it with MOLM's objective and key split."""

    def __init__(
        self, decoder: nn.Module, bits: int, *, hidden: int = 128, channels: int = 1, size: int = 16, width: int = 32
    ) -> None:
        super().__init__()
        if not (isinstance(bits, int) and bits >= 1):
            raise ValueError(f"bits: expected a positive int, got {bits!r}")
        convs = [m for m in decoder.modules() if isinstance(m, nn.Conv2d)]
        if not convs:
            raise ValueError(f"decoder: no nn.Conv2d inside {type(decoder).__name__} to modulate")
        self.decoder = decoder.requires_grad_(False)
        self.bits, self._sizes = bits, [conv.in_channels for conv in convs]
        self.mapping = nn.Sequential(nn.Linear(bits, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                     nn.Linear(hidden, sum(self._sizes)))  # fmt: skip
        nn.init.zeros_(self.mapping[-1].weight)
        nn.init.zeros_(self.mapping[-1].bias)
        self.extractor = BitExtractor(bits, channels=channels, size=size, width=width)
        self._scales: tuple[torch.Tensor, ...] | None = None
        for i, conv in enumerate(convs):
            conv.register_forward_pre_hook(partial(self._modulate, i))

    @property
    def key_bits(self) -> int:
        """M, the key length the mapping network reads."""
        return self.bits

    def _modulate(self, i: int, conv: nn.Module, args: tuple):
        if self._scales is None:
            return None
        x, scale = args[0], self._scales[i]
        if scale.shape[0] != x.shape[0]:
            raise ValueError(f"z: the keys hold {scale.shape[0]} samples, the batch {x.shape[0]}")
        return (x * scale[:, :, None, None].to(x.dtype), *args[1:])

    def scales(self, keys: torch.Tensor) -> torch.Tensor:
        """keys (B, M) bits -> the input-channel scales 1 + s of every modulated conv, concatenated: (B, sum C_in)."""
        if not isinstance(keys, torch.Tensor) or keys.dim() != 2 or keys.shape[1] != self.bits:
            got = tuple(keys.shape) if isinstance(keys, torch.Tensor) else type(keys).__name__
            raise ValueError(f"keys: expected a (B, {self.bits}) tensor of bits, got {got}")
        if not bool(((keys == 0) | (keys == 1)).all()):
            raise ValueError("keys: expected bits (0 or 1)")
        return 1 + self.mapping(2 * keys.float() - 1)

    def mark(self, z: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Decode latents z (B, ...) with each sample's key (B, M) modulating the weights -> (B, C, S, S)."""
        self._scales = self.scales(keys.to(z.device)).split(self._sizes, 1)
        try:
            return self.decoder(z)
        finally:
            self._scales = None

    def clean(self, z: torch.Tensor) -> torch.Tensor:
        """The frozen decoder's output (no key): (B, ...) -> (B, C, S, S)."""
        return self.decoder(z)

    def trainable(self) -> list[nn.Parameter]:
        """The mapping network and the extractor (the decoder stays frozen)."""
        return [*self.mapping.parameters(), *self.extractor.parameters()]
