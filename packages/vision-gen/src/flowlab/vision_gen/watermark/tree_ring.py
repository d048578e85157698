"""Tree-Ring (Wen et al., NeurIPS 2023): a baseline that writes a ring pattern into the Fourier transform of one
latent channel.

Key: a disc mask of radius `radius` around the centre of the (fftshifted) 2-D spectrum of channel `channel`, and a
complex pattern constant on integer-radius rings (values taken from the FFT of a Gaussian latent). Embedding draws
z ~ N(0, I), replaces the masked Fourier coefficients by the key and returns the real part of the inverse FFT.
Detection: the mean L1 distance between the masked spectrum of the recovered latent and the key (small means
watermarked); thresholds are set on an empirical ROC at the wanted FPR (`roc_threshold`), against given negatives or
unwatermarked Gaussian latents (`null_threshold`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import torch

from flowlab.vision_gen.watermark.base import check_key_tensor, check_latents, read_key_folder, write_key_folder

__all__ = ["TreeRing", "TreeRingConfig", "roc_threshold"]


@dataclass(frozen=True)
class TreeRingConfig:
    """Tree-Ring's settings: latents (C, H, W), the radius of the Fourier ring it writes, and the channel."""

    latent_shape: tuple[int, int, int]
    radius: int = 10
    channel: int = -1

    def __post_init__(self) -> None:
        object.__setattr__(self, "latent_shape", tuple(int(s) for s in self.latent_shape))
        if len(self.latent_shape) != 3:
            raise ValueError(f"latent_shape: expected (C, H, W), got {self.latent_shape}")
        c, h, w = self.latent_shape
        if not (1 <= self.radius < min(h, w) // 2):
            raise ValueError(f"radius: expected 1 <= radius < min(H, W)/2 = {min(h, w) // 2}, got {self.radius}")
        if not (-c <= self.channel < c):
            raise ValueError(f"channel: expected an index into {c} channels, got {self.channel}")


def _ring_radius(h: int, w: int) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(h) - h // 2, torch.arange(w) - w // 2, indexing="ij")
    return torch.sqrt((yy**2 + xx**2).double())


class TreeRing:
    """Tree-Ring (Wen et al.): a key pattern written into the centred Fourier transform of one latent channel inside a
    ring; detection is the distance to the pattern there (zero-bit: detected or not, no message)."""

    method = "tree_ring"

    def __init__(self, config: TreeRingConfig, pattern: torch.Tensor):
        self.config = config
        _, h, w = config.latent_shape
        p = check_key_tensor({"pattern": pattern}, "pattern", (2, h, w))
        self.pattern = torch.complex(p[0].double(), p[1].double())
        self.mask = _ring_radius(h, w) <= config.radius

    latent_shape = property(lambda self: self.config.latent_shape)

    @classmethod
    def from_seed(cls, config: TreeRingConfig, seed: int) -> TreeRing:
        """A key drawn from `seed`: inside `radius`, each ring takes one entry of the centred spectrum of a
        Gaussian (h, w) draw."""
        g = torch.Generator().manual_seed(int(seed))
        _, h, w = config.latent_shape
        spec = torch.fft.fftshift(torch.fft.fft2(torch.randn(h, w, generator=g, dtype=torch.float64)))
        rad = _ring_radius(h, w)
        pattern = spec.clone()
        for r in range(config.radius, 0, -1):  # constant on each ring, value from spectrum entry (h/2, w/2 + r)
            pattern[rad <= r] = spec[h // 2, w // 2 + r]
        return cls(config, torch.stack([pattern.real, pattern.imag]))

    def save(self, path: str | os.PathLike) -> None:
        """Writes the config and the key pattern (real and imaginary parts) as a key folder at `path`, for `load`."""
        write_key_folder(
            path, self.method, asdict(self.config), {"pattern": torch.stack([self.pattern.real, self.pattern.imag])}
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> TreeRing:
        """The key `save` wrote to `path`; ValueError for another method's key."""
        method, config, tensors = read_key_folder(path)
        if method != cls.method:
            raise ValueError(f"key: {path} holds a {method!r} key, expected {cls.method!r}")
        return cls(TreeRingConfig(**{**config, "latent_shape": tuple(config["latent_shape"])}), tensors.get("pattern"))

    def embed(
        self, batch: int | torch.Tensor, *, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        """batch: a count (or any (B, ...) tensor, e.g. messages, whose B is used) -> (B, C, H, W) latents."""
        b = batch if isinstance(batch, int) else batch.shape[0]
        dev = None if isinstance(batch, int) else batch.device
        z = torch.randn(b, *self.latent_shape, generator=generator, dtype=torch.float64, device=dev)
        ch = self.config.channel
        spec = torch.fft.fftshift(torch.fft.fft2(z[:, ch]), dim=(-2, -1))
        spec[:, self.mask.to(z.device)] = self.pattern.to(z.device)[self.mask.to(z.device)]
        z[:, ch] = torch.fft.ifft2(torch.fft.ifftshift(spec, dim=(-2, -1))).real
        return z.to(dtype)

    def distance(self, latents: torch.Tensor) -> torch.Tensor:
        """(B,) mean |FFT(z)[mask] - key[mask]| on the watermarked channel (small = watermarked)."""
        check_latents(latents, self.latent_shape)
        z = latents.to(torch.float64)
        spec = torch.fft.fftshift(torch.fft.fft2(z[:, self.config.channel]), dim=(-2, -1))
        m = self.mask.to(z.device)
        return (spec[:, m] - self.pattern.to(z.device)[m]).abs().mean(-1)

    def score(self, latents: torch.Tensor) -> torch.Tensor:
        """(B,) detection score (higher = watermarked): minus `distance`."""
        return -self.distance(latents)

    def null_threshold(self, fpr: float, *, n: int = 10_000, seed: int = 0) -> float:
        """The distance below which a latent counts as watermarked at false-positive rate `fpr` on `n` unwatermarked
        N(0, I) latents drawn from `seed` (an fpr below 1/n gets the smallest of their distances)."""
        if not 0 < fpr < 1:
            raise ValueError(f"fpr: expected a rate in (0, 1), got {fpr!r}")
        g = torch.Generator().manual_seed(seed)
        null = torch.cat([self.distance(torch.randn(min(1000, n - i), *self.latent_shape, generator=g))
                          for i in range(0, n, 1000)])  # fmt: skip
        return -roc_threshold(-null, fpr=fpr)


def roc_threshold(null_scores: torch.Tensor, *, fpr: float = 0.01) -> float:
    """The smallest threshold whose empirical false-positive rate on `null_scores` is <= fpr (score > threshold)."""
    s = torch.sort(null_scores.flatten().double(), descending=True).values
    k = int(fpr * s.numel())
    return float(s[k]) if k < s.numel() else float(s[-1])
