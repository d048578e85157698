"""A tiny convolutional image autoencoder with diffusers' `AutoencoderKL` interface, trained through
`flowlab.core.train.fit` and shared as a core artifact (built once into `$FLOWLAB_CACHE`, checked on every load).

    vae = tiny_autoencoder()                                  # digits, 16x16x1 <-> 8x8x4, KL-regularised
    z = vae.encode(x).latent_dist.sample(generator=g) * vae.config.scaling_factor
    x_hat = vae.decode(z / vae.config.scaling_factor).sample

What diffusers pipelines use works as on an `AutoencoderKL`: `encode(x, return_dict=True)` returns an
`AutoencoderKLOutput` whose `.latent_dist` is diffusers' own `DiagonalGaussianDistribution`, `decode(z,
return_dict=True, generator=None)` a `DecoderOutput`, `return_dict=False` one-element tuples, and `config` carries
`scaling_factor`, `latent_channels`, `block_out_channels` (`vae_scale_factor = 2 ** (len(block_out_channels) - 1)`)
and `force_upcast`, so `StableDiffusionPipeline(vae=TinyAutoencoder(...), ...)` runs. The downsampling factor is
that of the channel tuple: each entry past the first halves the resolution, so `channels=(16, 32)` maps 16x16
images to 8x8 latents (factor 2, the latent shape of the tests' tiny SD pipeline) and `(16, 32, 32)` to 4x4
(factor 4). `kl=False` makes a plain deterministic autoencoder: its posterior is built with `deterministic=True`
(std 0, logvar -30, `sample() == mean`, `kl() == 0`). `scaling_factor` is 1 / std of the training latents, as
Stable Diffusion's 0.18215 was chosen. `load_autoencoder` also opens a folder written by
`AutoencoderKL.save_pretrained`, so a real diffusers VAE takes the tiny one's place.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.core.train import cpu_state_dict, fit
from flowlab.vision_gen.kit.data import digits_source, load_digits_images
from flowlab.vision_gen.kit.photos import photo_crops, photo_path, photo_split

if TYPE_CHECKING:
    from diffusers import AutoencoderKL
    from diffusers.models.autoencoders.vae import DecoderOutput, DiagonalGaussianDistribution
    from diffusers.models.modeling_outputs import AutoencoderKLOutput

__all__ = [
    "AutoencoderConfig",
    "ResBlock",
    "TinyAutoencoder",
    "autoencoder_artifact",
    "group_norm",
    "load_autoencoder",
    "save_autoencoder",
    "tiny_autoencoder",
    "train_autoencoder",
]

#: the data sets `autoencoder_artifact` builds on (photos to come)
DATASETS = ("digits", "photos")
#: random crops of the train photos a "photos" autoencoder trains on
_PHOTO_CROPS = 4096
#: seconds per training step at size 16, channels (16, 32), batch 64 on one thread of the 2-core CPU machine, as every
#: artifact builds (measured in a cold `flowlab bench`, another build beside each: the 600-step digits build in 24 s,
#: GenDR-Pix's photo autoencoder in 268 s). Tiny convolutions cost about linearly in pixels x batch and in the
#: channel sum: on one machine a step of GenDR-Pix's photo autoencoder (32x32, channels (16, 32, 32), batch 32) took
#: 2.55x a digits step (238 against 93 ms), and `autoencoder_artifact` estimates 3.3x
_STEP_SECONDS = 0.035
#: log-variance of the deterministic (kl=False) posterior: diffusers' lower clamp
_DETERMINISTIC_LOGVAR = -30.0


@dataclass(frozen=True)
class AutoencoderConfig(Config):
    """The tiny autoencoder and its training. Architecture: `in_channels` image channels at `size` x `size`,
    `latent_channels` latent channels, one residual block per entry of `channels` (each entry past the first
    halves the resolution: `downsample = 2 ** (len(channels) - 1)`). `kl`: KL-regularised (loss = MSE + `kl_weight`
    * KL per image element, the latent sampled from the posterior) or a plain autoencoder (deterministic latent).
    Training: `steps` Adam steps at peak `lr` (one-cycle) on batches of `batch_size` drawn with `seed`, on
    `device` (a device type: the weights depend on it). `dataset`: what the artifact trains on ("digits": the
    kit's train split; "photos": 4096 seeded crops of the train photos of `photo_split`, grayscale when
    in_channels is 1; both in [-1, 1])."""

    size: int = 16
    in_channels: int = 1
    latent_channels: int = 4
    channels: tuple[int, ...] = (16, 32)
    kl: bool = True
    kl_weight: float = 1e-4
    steps: int = 600
    batch_size: int = 64
    lr: float = 2e-3
    seed: int = 0
    dataset: str = "digits"
    device: str = "cpu"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("size", "in_channels", "latent_channels", "steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected a positive int, got {getattr(self, name)!r}")
        if not self.channels or min(self.channels) < 1:
            raise ValueError(f"channels: expected a non-empty tuple of positive ints, got {self.channels!r}")
        if self.size % self.downsample:
            raise ValueError(f"size: expected a multiple of the downsampling factor {self.downsample}, got {self.size}")
        if not (self.kl_weight >= 0 and math.isfinite(self.kl_weight)):
            raise ValueError(f"kl_weight: expected a finite number >= 0, got {self.kl_weight!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr: expected a finite number > 0, got {self.lr!r}")
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset: expected one of {DATASETS}, got {self.dataset!r}")
        if self.device not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device: expected a device type (cpu, cuda or mps), got {self.device!r}")

    @property
    def downsample(self) -> int:
        """The spatial downsampling factor image -> latent."""
        return 2 ** (len(self.channels) - 1)


def group_norm(channels: int) -> nn.GroupNorm:
    """GroupNorm over gcd(channels, 8) groups."""
    return nn.GroupNorm(math.gcd(channels, 8), channels)


class ResBlock(nn.Module):
    """(B, c, H, W) -> (B, c, H, W): x + two norm-SiLU-conv layers."""

    def __init__(self, c: int) -> None:
        super().__init__()
        conv = [group_norm(c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1)]
        self.body = nn.Sequential(*conv, group_norm(c), nn.SiLU(), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, c, H, W) -> `x + body(x)`: (B, c, H, W)."""
        return x + self.body(x)


def _tail(c: int, out_channels: int) -> nn.Sequential:
    """(B, c, H, W) -> (B, out_channels, H, W): the last residual block, then norm-SiLU-conv."""
    return nn.Sequential(ResBlock(c), group_norm(c), nn.SiLU(), nn.Conv2d(c, out_channels, 3, padding=1))


def _encoder(in_channels: int, channels: tuple[int, ...], out_channels: int) -> nn.Sequential:
    """(B, in_channels, S, S) -> (B, out_channels, S / 2 ** (len(channels) - 1), ...): a residual block at each
    width, a stride-2 conv into the next width between them."""
    layers: list[nn.Module] = [nn.Conv2d(in_channels, channels[0], 3, padding=1)]
    for c, c_next in itertools.pairwise(channels):
        layers += [ResBlock(c), nn.Conv2d(c, c_next, 3, stride=2, padding=1)]
    return nn.Sequential(*layers, _tail(channels[-1], out_channels))


def _decoder(latent_channels: int, channels: tuple[int, ...], out_channels: int) -> nn.Sequential:
    """(B, latent_channels, s, s) -> (B, out_channels, s * 2 ** (len(channels) - 1), ...): the encoder mirrored,
    nearest-neighbour x2 upsampling then a conv into the next width between the blocks."""
    up = channels[::-1]
    layers: list[nn.Module] = [nn.Conv2d(latent_channels, up[0], 3, padding=1)]
    for c, c_next in itertools.pairwise(up):
        layers += [ResBlock(c), nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c, c_next, 3, padding=1)]
    return nn.Sequential(*layers, _tail(up[-1], out_channels))


def _check_batch(x: Any, name: str, channels: int, multiple: int) -> None:
    """x: (B, channels, H, W), floating, finite, H and W multiples of `multiple`; else a ValueError naming `name`."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor (B, {channels}, H, W), got {type(x).__name__}")
    if x.ndim != 4 or x.shape[0] < 1 or x.shape[1] != channels:
        raise ValueError(f"{name}: expected shape (B, {channels}, H, W) with B >= 1, got {tuple(x.shape)}")
    if x.shape[2] % multiple or x.shape[3] % multiple or x.shape[2] < 1 or x.shape[3] < 1:
        raise ValueError(f"{name}: expected H and W positive multiples of {multiple}, got {tuple(x.shape[2:])}")
    if not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: expected finite values, got NaN or inf")


class TinyAutoencoder(nn.Module):
    """A conv VAE (or plain AE with `settings.kl=False`) with the `AutoencoderKL` interface pipelines use.

    encode: x (B, in_channels, H, W) in [-1, 1] -> posterior over z (B, latent_channels, H / f, W / f), f =
    `settings.downsample`; decode: z -> (B, in_channels, H, W). H and W: any multiples of f. `settings`: the
    `AutoencoderConfig` it was built from; `config`: the diffusers-style frozen dict pipelines read."""

    def __init__(self, settings: AutoencoderConfig, *, scaling_factor: float = 1.0) -> None:
        super().__init__()
        if not isinstance(settings, AutoencoderConfig):
            raise ValueError(f"settings: expected an AutoencoderConfig, got {type(settings).__name__}")
        self.settings = settings
        moments = 2 * settings.latent_channels if settings.kl else settings.latent_channels
        self.encoder = _encoder(settings.in_channels, settings.channels, moments)
        self.decoder = _decoder(settings.latent_channels, settings.channels, settings.in_channels)
        self.set_scaling_factor(scaling_factor)

    def set_scaling_factor(self, value: float) -> None:
        """Replace `config` with one whose `scaling_factor` is `value` (> 0, finite)."""
        from diffusers.configuration_utils import FrozenDict

        if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and math.isfinite(value)):
            raise ValueError(f"value: expected a finite scaling factor > 0, got {value!r}")
        s = self.settings
        self.config = FrozenDict(
            in_channels=s.in_channels, out_channels=s.in_channels, latent_channels=s.latent_channels,
            block_out_channels=s.channels, sample_size=s.size, scaling_factor=float(value), force_upcast=True,
        )  # fmt: skip

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the parameters."""
        return next(self.parameters()).dtype

    @property
    def device(self) -> torch.device:
        """The device of the parameters."""
        return next(self.parameters()).device

    def _posterior(self, x: torch.Tensor) -> DiagonalGaussianDistribution:
        """x: (B, C, H, W) -> diffusers' DiagonalGaussianDistribution over (B, latent_channels, H / f, W / f)."""
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

        h = self.encoder(x)
        if self.settings.kl:
            return DiagonalGaussianDistribution(h)
        return DiagonalGaussianDistribution(torch.cat([h, torch.full_like(h, _DETERMINISTIC_LOGVAR)], 1), True)

    def encode(
        self, x: torch.Tensor, return_dict: bool = True
    ) -> AutoencoderKLOutput | tuple[DiagonalGaussianDistribution]:
        """x: (B, in_channels, H, W) -> `AutoencoderKLOutput(latent_dist=...)`, or `(latent_dist,)`."""
        from diffusers.models.modeling_outputs import AutoencoderKLOutput

        _check_batch(x, "x", self.settings.in_channels, self.settings.downsample)
        posterior = self._posterior(x)
        return AutoencoderKLOutput(latent_dist=posterior) if return_dict else (posterior,)

    def decode(
        self, z: torch.Tensor, return_dict: bool = True, generator: torch.Generator | None = None
    ) -> DecoderOutput | tuple[torch.Tensor]:
        """z: (B, latent_channels, h, w) -> `DecoderOutput(sample=(B, in_channels, h f, w f))`, or `(sample,)`.
        `generator` is accepted and unused, as in `AutoencoderKL.decode` (the decoder is deterministic)."""
        from diffusers.models.autoencoders.vae import DecoderOutput

        _check_batch(z, "z", self.settings.latent_channels, 1)
        out = self.decoder(z)
        return DecoderOutput(sample=out) if return_dict else (out,)

    def forward(
        self,
        sample: torch.Tensor,
        sample_posterior: bool = False,
        return_dict: bool = True,
        generator: torch.Generator | None = None,
    ) -> DecoderOutput | tuple[torch.Tensor]:
        """sample: (B, in_channels, H, W) -> its reconstruction through the posterior's mode (or a draw with
        `sample_posterior`), as `AutoencoderKL.forward`: `DecoderOutput` or `(sample,)`."""
        posterior = self.encode(sample).latent_dist
        z = posterior.sample(generator=generator) if sample_posterior else posterior.mode()
        return self.decode(z, return_dict=return_dict)


class _Objective(nn.Module):
    """The training loss around an autoencoder, so `fit` (and DDP) sees one forward: x (B, C, H, W) -> (loss,
    logs), loss = MSE + kl_weight * KL / (C H W) (KL only when `settings.kl`)."""

    def __init__(self, autoencoder: TinyAutoencoder) -> None:
        super().__init__()
        self.autoencoder = autoencoder

    def forward(self, x: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        ae = self.autoencoder
        posterior = ae._posterior(x)
        mse = F.mse_loss(ae.decoder(posterior.sample(generator=generator)), x)
        if not ae.settings.kl:
            return mse, {"mse": mse.detach()}
        kl = posterior.kl().mean() / x[0].numel()
        return mse + ae.settings.kl_weight * kl, {"mse": mse.detach(), "kl": kl.detach()}


def _latent_std(autoencoder: TinyAutoencoder, images: torch.Tensor, generator: torch.Generator) -> float:
    """The std of posterior draws over `images` (N, C, H, W), encoded in chunks of 512."""
    with torch.no_grad():
        chunks = [autoencoder._posterior(x).sample(generator=generator) for x in images.split(512)]
    return float(torch.cat(chunks).std())


def _for_inference(autoencoder: TinyAutoencoder) -> TinyAutoencoder:
    return autoencoder.eval().requires_grad_(False)


def train_autoencoder(images: torch.Tensor, config: AutoencoderConfig, *, progress: bool = False) -> TinyAutoencoder:
    """A `TinyAutoencoder` of `config` trained on `images` (N, in_channels, size, size) in [-1, 1] through `fit`
    (Adam, one-cycle LR, grad clip 1, seeded by `config.seed`, on `config.device`); its `scaling_factor` is set to
    1 / std of the trained posterior's draws on `images`. Returned in eval mode without gradients."""
    if not isinstance(config, AutoencoderConfig):
        raise ValueError(f"config: expected an AutoencoderConfig, got {type(config).__name__}")
    _check_batch(images, "images", config.in_channels, config.downsample)
    if images.shape[2:] != (config.size, config.size):
        raise ValueError(
            f"images: expected {config.size}x{config.size} images (config.size), got {tuple(images.shape)}"
        )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        autoencoder = TinyAutoencoder(config)
    data = images.to(config.device)
    gen = torch.Generator().manual_seed(config.seed)

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        return data[torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(data.device)]

    opt = torch.optim.Adam(autoencoder.parameters(), lr=config.lr)
    fit(
        _Objective(autoencoder),
        lambda model, x, g: model(x, generator=g),
        batches,
        steps=config.steps,
        optimizer=opt,
        lr_schedule=torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=config.lr, total_steps=config.steps),
        device=config.device,
        generator=gen,
        progress=progress,
        log_every=max(1, config.steps // 10),
    )
    autoencoder.set_scaling_factor(1.0 / _latent_std(autoencoder.eval(), data, gen))
    return _for_inference(autoencoder)


def save_autoencoder(autoencoder: TinyAutoencoder, folder: str | os.PathLike[str]) -> Path:
    """Write `autoencoder` into `folder` (created): weights.pt (its state_dict, CPU tensors) and config.json
    (`_class_name` TinyAutoencoder, its `AutoencoderConfig` and `scaling_factor`), what `load_autoencoder` reads."""
    if not isinstance(autoencoder, TinyAutoencoder):
        raise ValueError(f"autoencoder: expected a TinyAutoencoder, got {type(autoencoder).__name__}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(cpu_state_dict(autoencoder), folder / "weights.pt")
    meta = {
        "_class_name": "TinyAutoencoder",
        "config": autoencoder.settings.to_dict(),
        "scaling_factor": autoencoder.config.scaling_factor,
    }
    (folder / "config.json").write_text(json.dumps(meta, indent=2))
    return folder


def load_autoencoder(path_or_folder: str | os.PathLike[str]) -> TinyAutoencoder | AutoencoderKL:
    """The autoencoder in a folder (or the folder of a file given): a `TinyAutoencoder` written by
    `save_autoencoder` (eval mode, no grad; weights read with `weights_only=True`), or a diffusers
    `AutoencoderKL` written by its `save_pretrained` (`from_pretrained(..., local_files_only=True)`)."""
    if not isinstance(path_or_folder, str | os.PathLike):
        raise ValueError(f"path_or_folder: expected a path, got {type(path_or_folder).__name__}")
    folder = Path(path_or_folder)
    folder = folder.parent if folder.is_file() else folder
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"path_or_folder: expected a folder holding config.json, got {str(path_or_folder)!r}")
    meta = json.loads((folder / "config.json").read_text())
    kind = meta.get("_class_name")
    if kind == "AutoencoderKL":
        from diffusers import AutoencoderKL

        return AutoencoderKL.from_pretrained(folder, local_files_only=True)
    if kind != "TinyAutoencoder":
        raise ValueError(f"path_or_folder: expected a TinyAutoencoder or AutoencoderKL folder, got {kind!r}")
    if not (folder / "weights.pt").is_file():
        raise FileNotFoundError(f"path_or_folder: expected weights.pt beside config.json in {str(folder)!r}")
    autoencoder = TinyAutoencoder(AutoencoderConfig.from_mapping(meta["config"]), scaling_factor=meta["scaling_factor"])
    autoencoder.load_state_dict(torch.load(folder / "weights.pt", map_location="cpu", weights_only=True))
    return _for_inference(autoencoder)


def _training_images(config: AutoencoderConfig) -> torch.Tensor:
    if config.dataset == "photos":
        return photo_crops("train", config.size, _PHOTO_CROPS, seed=config.seed, grayscale=config.in_channels == 1).x
    return load_digits_images(config.size, split="train").x


def _build_autoencoder(config: AutoencoderConfig, folder: Path) -> None:
    images = _training_images(config)
    save_autoencoder(train_autoencoder(images, config, progress=True), folder)


def autoencoder_artifact(config: AutoencoderConfig) -> Artifact:
    """The cache entry of one trained autoencoder (for a scenario's `requires` and for `tiny_autoencoder`)."""
    if not isinstance(config, AutoencoderConfig):
        raise ValueError(f"config: expected an AutoencoderConfig, got {type(config).__name__}")
    if config.dataset == "digits" and (config.in_channels != 1 or config.size not in (8, 16, 32)):
        raise ValueError(
            f"config: dataset 'digits' has in_channels 1 and size 8, 16 or 32, got {config.in_channels}, {config.size}"
        )
    if config.dataset == "photos" and config.in_channels not in (1, 3):
        raise ValueError(f"config: dataset 'photos' has in_channels 1 (grayscale) or 3, got {config.in_channels}")
    inputs = (digits_source(),) if config.dataset == "digits" else tuple(photo_path(n) for n in photo_split()["train"])
    scale = (config.size / 16) ** 2 * sum(config.channels) / 48 * config.batch_size / 64
    return Artifact(
        "vision.tiny_autoencoder",
        build=_build_autoencoder,
        config=config,
        inputs=inputs,
        expected_seconds=max(1.0, config.steps * _STEP_SECONDS * scale),
        description=f"{'KL ' if config.kl else ''}autoencoder on {config.dataset}, {config.size}x{config.size} -> "
        f"{config.latent_channels}x{config.size // config.downsample}x{config.size // config.downsample}",
    )


def tiny_autoencoder(
    config: AutoencoderConfig | None = None, *, device: torch.device | str | None = None
) -> TinyAutoencoder:
    """The trained autoencoder of `config` (default: `AutoencoderConfig()`; eval mode, no grad) on `device`
    (default: the one it was trained on), built into the cache on the first call."""
    config = config or AutoencoderConfig()
    entry = ensure(autoencoder_artifact(config))
    return load_autoencoder(entry.path).to(device or config.device)
