"""The tiny epsilon-prediction digits denoisers: training through `flowlab.core.train.fit`, and the shared trained
teacher as a core artifact (built once into `$FLOWLAB_CACHE`, checked on every load).

    teacher = digits_denoiser(DigitsDenoiserConfig(steps=1500, dither=0.1, data_range=0.75))
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.core.losses import ddpm_loss
from flowlab.core.schedules import DiscreteVP
from flowlab.core.train import EMA, cpu_state_dict, fit
from flowlab.vision_gen.kit.data import digits_source, load_digits_images
from flowlab.vision_gen.kit.nets import CoreUNetField, DiTField, UNetField, core_unet, tiny_dit, tiny_unet

__all__ = [
    "ARCHS",
    "DigitsDenoiserConfig",
    "digits_denoiser",
    "digits_denoiser_artifact",
    "fit_with_ema",
    "train_digits_denoiser",
]

#: the denoiser backbones `train_digits_denoiser` builds: a diffusers UNet, the core DiT, the core UNet2d
ARCHS = ("unet", "dit", "core_unet")
#: seconds per training step of the 16x16 UNet with 32 base channels, batch 128, on the 2-core CPU machine's two
#: threads, as the artifact builds (measured: 1500 steps in 458-549 s; 816 s on one thread beside another build)
_STEP_SECONDS = 0.37
#: the denoiser builds on two threads, alone: the longest build of the vision kit (458-549 s alone on two threads
#: against 816 s on one beside another build), with the bytes behind the watermark's published tables
_BUILD_THREADS = 2


@dataclass(frozen=True)
class DigitsDenoiserConfig(Config):
    """The shared digits teacher: `train_digits_denoiser` on scikit-learn's digits (the kit's train split), at
    `size`, scaled to [-data_range, data_range]; trained on `device` (a device type: the weights depend on it)."""

    size: int = 16
    data_range: float = 1.0
    steps: int = 2000
    batch_size: int = 128
    lr: float = 2e-3
    seed: int = 0
    base_channels: int = 32
    arch: str = "unet"
    dither: float = 0.0
    device: str = "cpu"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.arch not in ARCHS:
            raise ValueError(f"arch: expected one of {ARCHS}, got {self.arch!r}")
        if not 0 < self.data_range <= 1:
            raise ValueError(f"data_range: expected a value in (0, 1], got {self.data_range!r}")
        if self.device not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device: expected a device type (cpu, cuda or mps), got {self.device!r}")


def _build_denoiser(config: DigitsDenoiserConfig, folder: Path) -> None:
    images = load_digits_images(config.size, split="train", value_range=(-config.data_range, config.data_range)).x
    field = train_digits_denoiser(
        images,
        steps=config.steps,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=config.seed,
        base_channels=config.base_channels,
        arch=config.arch,
        dither=config.dither,
        device=config.device,
        progress=True,
    )
    torch.save(cpu_state_dict(field), folder / "weights.pt")


def digits_denoiser_artifact(config: DigitsDenoiserConfig) -> Artifact:
    """The cache entry of one teacher (for a scenario's `requires` and for `digits_denoiser`)."""
    scale = (config.size / 16) ** 2 * (config.base_channels / 32) ** 2 * config.batch_size / 128
    return Artifact(
        "vision.digits_denoiser",
        build=_build_denoiser,
        config=config,
        inputs=(digits_source(),),
        expected_seconds=max(1.0, config.steps * _STEP_SECONDS * scale),
        threads=_BUILD_THREADS,
        description=f"{config.arch} digits denoiser, {config.size}x{config.size}, {config.steps} steps",
    )


def digits_denoiser(
    config: DigitsDenoiserConfig, *, device: torch.device | str | None = None
) -> UNetField | DiTField | CoreUNetField:
    """The trained teacher of `config` (EMA weights, eval mode) on `device` (default: the one it was trained on),
    built into the cache on the first call."""
    entry = ensure(digits_denoiser_artifact(config))
    field = _field(config.arch, config.size, 1, config.base_channels)
    field.load_state_dict(torch.load(entry.path / "weights.pt", map_location="cpu", weights_only=True))
    return _for_inference(field.to(device or config.device))


def _field(arch: str, size: int, channels: int, base_channels: int) -> UNetField | DiTField | CoreUNetField:
    schedule = DiscreteVP.linear()
    if arch == "core_unet":
        return CoreUNetField(core_unet(size, channels, base_channels=base_channels), schedule=schedule)
    if arch == "dit":
        return DiTField(tiny_dit(size, channels, dim=2 * base_channels), schedule=schedule)
    return UNetField(tiny_unet(size, channels, base_channels=base_channels), schedule=schedule)


def train_digits_denoiser(
    images: torch.Tensor,
    *,
    steps: int = 2000,
    batch_size: int = 128,
    lr: float = 2e-3,
    seed: int = 0,
    base_channels: int = 32,
    arch: str = "unet",
    dither: float = 0.0,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> UNetField | DiTField | CoreUNetField:
    """An epsilon-prediction tiny denoiser on `images` (N, C, S, S) in [-1, 1] with DiscreteVP.linear(); EMA weights.

    arch "unet": `tiny_unet` with `base_channels`; "dit": `tiny_dit` (patch 2, width 2 base_channels, depth 4);
    "core_unet": the core `UNet2d` of `core_unet` with `base_channels`.
    dither: the std of fresh Gaussian noise added to every training batch, so the model learns images + N(0,
    dither² I), a density with full support. Upsampled digits span a 64-dim subspace of the 256 pixels, and a
    generator of such data shrinks the initial noise off it to the last grid noise level; latent watermarks need
    that noise back from the image.
    `digits_denoiser` keeps the shared, cached teacher; this trains one afresh on any images.
    """
    if arch not in ARCHS:
        raise ValueError(f"arch: expected one of {ARCHS}, got {arch!r}")
    if not (isinstance(dither, int | float) and dither >= 0):
        raise ValueError(f"dither: expected a number >= 0, got {dither!r}")
    schedule = DiscreteVP.linear()
    size, channels = images.shape[-1], images.shape[1]
    torch.manual_seed(seed)
    field = _field(arch, size, channels, base_channels).to(device)
    data = images.to(device)
    gen = torch.Generator().manual_seed(seed)

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        idx = torch.randint(0, data.shape[0], (batch_size,), generator=g)
        batch = data[idx.to(data.device)]
        if dither:
            batch = batch + dither * torch.randn(batch.shape, generator=g).to(batch)
        return batch

    def loss(model, x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, dict]:
        return ddpm_loss(model, x, schedule, generator=g), {}

    fit_with_ema(field, loss, batches, steps=steps, lr=lr, device=device, generator=gen, progress=progress)
    return _for_inference(field)


def fit_with_ema(
    model: torch.nn.Module,
    loss_fn,
    batches,
    *,
    steps: int,
    lr: float,
    ema_decay: float | None = 0.999,
    ema_warmup: int = 100,
    schedule: str = "one_cycle",
    param_groups: list[dict] | None = None,
    device: torch.device | str,
    generator: torch.Generator,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> None:
    """The kit's training recipe on the core `fit`: Adam (on `param_groups`, each at its own "lr", default every
    parameter at `lr`), `steps` steps (checkpointed to and resumed from `ckpt_dir` when given), the learning rate on
    `schedule`: "one_cycle" (one-cycle to `lr`, 5 % warm-up) or "warmup_cosine" (linear warm-up over the first 5 %,
    then cosine decay to 0, scaling each group's lr); an EMA of `ema_decay` (tracking the weights for its first
    `ema_warmup` steps; None: no EMA); `model` ends holding the EMA weights.
    loss_fn(model, batch, generator) -> (loss, logs) and batches(step, generator) as `fit` takes them."""
    if schedule not in ("one_cycle", "warmup_cosine"):
        raise ValueError(f"schedule: expected one_cycle or warmup_cosine, got {schedule!r}")
    if param_groups is not None and schedule == "one_cycle":
        raise ValueError("param_groups: one_cycle takes one peak lr; use schedule='warmup_cosine'")
    ema = None if ema_decay is None else EMA(model, decay=ema_decay, warmup_steps=ema_warmup)
    opt = torch.optim.Adam(param_groups or model.parameters(), lr=lr)
    if schedule == "one_cycle":
        # torch's OneCycleLR divides by zero when pct_start * steps is exactly 1 (20 steps): warm up over 1.5 then
        pct_start = 0.05 if 0.05 * steps != 1 else 0.075
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=pct_start)
    else:
        warm = max(1, steps // 20)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda k: min(1.0, (k + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(k, steps) / steps))
        )
    fit(
        model,
        loss_fn,
        batches,
        steps=steps,
        optimizer=opt,
        lr_schedule=sched,
        ema=ema,
        device=device,
        generator=generator,
        progress=progress,
        log_every=max(1, steps // 10),
        ckpt_dir=ckpt_dir,
        ckpt_every=max(1, steps // 4),
    )
    if ema is not None:
        ema.copy_to_model()


def _for_inference(field: UNetField | DiTField) -> UNetField | DiTField:
    """Eval mode; a UNet's conv weights in channels_last, about 25 % faster on CPU (outputs equal to float rounding)."""
    if isinstance(field, UNetField):
        field = field.to(memory_format=torch.channels_last)
    return field.eval()
