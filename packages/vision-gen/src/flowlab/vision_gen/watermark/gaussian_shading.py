"""Gaussian Shading (Yang et al., CVPR 2024): a baseline latent watermark.

The message, shaped as a small block `message_shape`, is tiled over the latent; the tiled bits are XORed with a
ChaCha20 keystream (one fixed key and nonce for every image, or a fresh nonce per image, `key_mode`) and each latent
entry is drawn from the half of N(0, 1) its bit selects (truncated sampling: z = Phi^{-1}((u + y) / 2),
u ~ U(0, 1)). Extraction: signs, XOR the keystream, majority vote over the tiles; detection thresholds come from
the binomial tail via betainc.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import torch

from flowlab.vision_gen.watermark.base import (
    DetectionResult,
    ExtractResult,
    binomial_detection,
    bits_tensor,
    check_key_tensor,
    check_latents,
    read_key_folder,
    write_key_folder,
)
from flowlab.vision_gen.watermark.chacha20 import chacha20_keystream

__all__ = ["GaussianShading", "GaussianShadingConfig"]


@dataclass(frozen=True)
class GaussianShadingConfig:
    """latent_shape (C, H, W); message_shape (c, h, w) dividing it elementwise; key_mode "fixed" | "per_image"."""

    latent_shape: tuple[int, ...]
    message_shape: tuple[int, ...]
    key_mode: Literal["fixed", "per_image"] = "per_image"

    def __post_init__(self) -> None:
        object.__setattr__(self, "latent_shape", tuple(int(s) for s in self.latent_shape))
        object.__setattr__(self, "message_shape", tuple(int(s) for s in self.message_shape))
        if len(self.latent_shape) != len(self.message_shape) or any(
            m < 1 or s % m for s, m in zip(self.latent_shape, self.message_shape, strict=True)
        ):
            raise ValueError(
                f"message_shape: {self.message_shape} must divide latent_shape {self.latent_shape} elementwise"
            )
        if self.key_mode not in ("fixed", "per_image"):
            raise ValueError(f"key_mode: expected 'fixed' or 'per_image', got {self.key_mode!r}")

    @property
    def message_bits(self) -> int:
        """The message length l_m, the product of `message_shape`."""
        return math.prod(self.message_shape)

    @property
    def tiles(self) -> tuple[int, ...]:
        """How many copies of the message tile the latent along each axis, `latent_shape // message_shape`."""
        return tuple(s // m for s, m in zip(self.latent_shape, self.message_shape, strict=True))


class GaussianShading:
    """Key: a 32-byte ChaCha20 key and a base 12-byte nonce (used for every image in "fixed" mode)."""

    method = "gaussian_shading"

    def __init__(self, config: GaussianShadingConfig, key: torch.Tensor, nonce: torch.Tensor):
        self.config = config
        self.key = check_key_tensor({"key": key}, "key", (32,)).to(torch.uint8)
        self.nonce = check_key_tensor({"nonce": nonce}, "nonce", (12,)).to(torch.uint8)

    latent_shape = property(lambda self: self.config.latent_shape)
    message_bits = property(lambda self: self.config.message_bits)

    @classmethod
    def from_seed(cls, config: GaussianShadingConfig, seed: int) -> GaussianShading:
        """A key drawn from `seed`: a random 32-byte key and 12-byte nonce."""
        g = torch.Generator().manual_seed(int(seed))
        return cls(config, torch.randint(0, 256, (32,), generator=g), torch.randint(0, 256, (12,), generator=g))

    def save(self, path: str | os.PathLike) -> None:
        """Writes the key (config, key and nonce) as a key folder at `path`, for `load`."""
        write_key_folder(path, self.method, asdict(self.config), {"key": self.key, "nonce": self.nonce})

    @classmethod
    def load(cls, path: str | os.PathLike) -> GaussianShading:
        """The key `save` wrote to `path`; ValueError for another method's key or a malformed config."""
        method, config, tensors = read_key_folder(path)
        if method != cls.method:
            raise ValueError(f"key: {path} holds a {method!r} key, expected {cls.method!r}")
        try:
            cfg = GaussianShadingConfig(**config)
        except TypeError as err:
            raise ValueError(f"key: config in {path} is malformed ({err})") from err
        return cls(cfg, tensors.get("key"), tensors.get("nonce"))

    def new_nonces(self, batch: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """(B, 12) uint8 per-image nonces ("per_image" mode; store them with the images) or the fixed nonce."""
        if self.config.key_mode == "fixed":
            return self.nonce.expand(batch, 12).clone()
        return torch.randint(0, 256, (batch, 12), generator=generator, dtype=torch.int64).to(torch.uint8)

    def keystream_bits(self, nonces: torch.Tensor) -> torch.Tensor:
        """(B, 12) nonces -> (B, l_x) keystream bits (int64)."""
        l_x = math.prod(self.latent_shape)
        stream = chacha20_keystream(bytes(self.key.tolist()), nonces.cpu().numpy(), -(-l_x // 8))
        return torch.from_numpy(np.unpackbits(stream, axis=1)[:, :l_x].astype(np.int64))

    def _nonces(self, batch: int, nonces: torch.Tensor | None) -> torch.Tensor:
        if nonces is None:
            if self.config.key_mode == "per_image":
                raise ValueError("nonces: per_image Gaussian Shading needs the (B, 12) nonces of each image")
            return self.new_nonces(batch)
        if tuple(nonces.shape) != (batch, 12):
            raise ValueError(f"nonces: expected shape ({batch}, 12), got {tuple(nonces.shape)}")
        return nonces.to(torch.uint8)

    def embed(
        self,
        messages: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        nonces: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """messages: (B, l_m) bits -> (B, *latent_shape). per_image mode: pass `nonces` from `new_nonces`."""
        m = bits_tensor(messages, self.message_bits)
        b, dev = m.shape[0], m.device
        if self.config.key_mode == "per_image" and nonces is None:
            raise ValueError("nonces: per_image mode draws them with new_nonces(B, generator=...) and keeps them")
        s = self.keystream_bits(self._nonces(b, nonces)).to(dev)
        tiled = m.reshape(b, *self.config.message_shape).repeat(1, *self.config.tiles).reshape(b, -1)
        y = (tiled ^ s).to(torch.float64)
        u = torch.rand(b, y.shape[1], generator=generator, device=dev, dtype=torch.float64).clamp(1e-12, 1 - 1e-12)
        z = math.sqrt(2.0) * torch.erfinv((u + y) - 1.0)  # Phi^{-1}((u + y) / 2)
        return z.reshape(b, *self.latent_shape).to(dtype)

    def extract(self, latents: torch.Tensor, *, nonces: torch.Tensor | None = None) -> ExtractResult:
        """latents: `(B, *latent_shape)` recovered initial noise -> decoded message bits (majority vote over the tiled
        copies); `nonces`: (B, 12), required in "per_image" mode."""
        z = check_latents(latents, self.latent_shape)
        b = z.shape[0]
        s = self.keystream_bits(self._nonces(b, nonces)).to(z.device)
        d = (z > 0).long() ^ s
        ms, tiles = self.config.message_shape, self.config.tiles
        shape = [b]
        for t, m in zip(tiles, ms, strict=True):
            shape += [t, m]
        d = d.reshape(shape)
        k = len(ms)
        d = d.permute(0, *[1 + 2 * i for i in range(k)], *[2 + 2 * i for i in range(k)])
        copies = d.reshape(b, math.prod(tiles), self.message_bits)
        votes = copies.double().mean(1)
        return ExtractResult(bits=(votes > 0.5).long(), copies=copies, votes=votes)

    def detect(
        self, latents: torch.Tensor, message: torch.Tensor, *, fpr: float = 0.01, nonces: torch.Tensor | None = None
    ) -> DetectionResult:
        """Matching bits to `message` ((l_m,) or (B, l_m)) against the Binomial(l_m, 1/2) threshold at `fpr`."""
        bits = self.extract(latents, nonces=nonces).bits
        m = message if message.dim() == 2 else message[None]
        m = bits_tensor(m, self.message_bits, bits.device).expand_as(bits)
        return binomial_detection((bits == m).sum(-1), self.message_bits, fpr)
