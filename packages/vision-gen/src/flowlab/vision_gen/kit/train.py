"""Training and caching of the tiny epsilon-prediction denoisers through `flowlab.core.train.fit`."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from flowlab.core.losses import ddpm_loss
from flowlab.core.schedules import DiscreteVP
from flowlab.core.train import EMA, fit
from flowlab.vision_gen.kit.nets import DiTField, UNetField, tiny_dit, tiny_unet

__all__ = ["ARCHS", "cache_dir", "train_digits_denoiser"]

#: the denoiser backbones `train_digits_denoiser` builds
ARCHS = ("unet", "dit")


def cache_dir() -> Path:
    """$FLOWLAB_CACHE (default ~/.cache/flowlab)."""
    return Path(os.environ.get("FLOWLAB_CACHE", Path.home() / ".cache" / "flowlab"))


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
    use_cache: bool = True,
    progress: bool = False,
) -> UNetField | DiTField:
    """An epsilon-prediction tiny denoiser on `images` (N, C, S, S) in [-1, 1] with DiscreteVP.linear(); EMA weights.

    arch "unet": `tiny_unet` with `base_channels`; "dit": `tiny_dit` (patch 2, width 2 base_channels, depth 4).
    dither: the std of fresh Gaussian noise added to every training batch, so the model learns images + N(0,
    dither² I), a density with full support. Upsampled digits span a 64-dim subspace of the 256 pixels, and a
    generator of such data shrinks the initial noise off it to the last grid noise level; latent watermarks need
    that noise back from the image.
    Trained weights are cached under cache_dir()/denoisers keyed by the data, the settings and the torch version.
    """
    if arch not in ARCHS:
        raise ValueError(f"arch: expected one of {ARCHS}, got {arch!r}")
    if not (isinstance(dither, int | float) and dither >= 0):
        raise ValueError(f"dither: expected a number >= 0, got {dither!r}")
    schedule = DiscreteVP.linear()
    size, channels = images.shape[-1], images.shape[1]

    def build() -> UNetField | DiTField:
        if arch == "dit":
            return DiTField(tiny_dit(size, channels, dim=2 * base_channels), schedule=schedule)
        return UNetField(tiny_unet(size, channels, base_channels=base_channels), schedule=schedule)

    settings = [steps, batch_size, lr, seed, base_channels, arch, torch.__version__, list(images.shape)]
    if dither:
        settings.append(float(dither))
    key = hashlib.sha256(json.dumps(settings).encode() + images.cpu().numpy().tobytes()).hexdigest()[:16]
    path = cache_dir() / "denoisers" / f"digits{size}_{arch}_{key}.pt"
    if use_cache and path.is_file():
        field = build()
        field.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return _for_inference(field.to(device))
    torch.manual_seed(seed)
    field = build().to(device)
    data = images.to(device)
    gen = torch.Generator().manual_seed(seed)

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        idx = torch.randint(0, data.shape[0], (batch_size,), generator=g)
        batch = data[idx.to(data.device)]
        if dither:
            batch = batch + dither * torch.randn(batch.shape, generator=g).to(batch)
        return batch

    ema = EMA(field, decay=0.999, warmup_steps=100)
    opt = torch.optim.Adam(field.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    fit(
        field,
        lambda model, x, g: (ddpm_loss(model, x, schedule, generator=g), {}),
        batches,
        steps=steps,
        optimizer=opt,
        lr_schedule=sched,
        ema=ema,
        device=device,
        generator=gen,
        progress=progress,
        log_every=max(1, steps // 10),
    )
    with ema.swap():
        state = {k: v.detach().cpu().clone() for k, v in field.state_dict().items()}
    field.load_state_dict(state)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, path)
    return _for_inference(field)


def _for_inference(field: UNetField | DiTField) -> UNetField | DiTField:
    """Eval mode; a UNet's conv weights in channels_last, about 25 % faster on CPU (outputs equal to float rounding)."""
    if isinstance(field, UNetField):
        field = field.to(memory_format=torch.channels_last)
    return field.eval()
