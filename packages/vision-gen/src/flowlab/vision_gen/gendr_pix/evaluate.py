"""Evaluation: PSNR/SSIM (the kit's scikit-image metrics) and periodic-artifact energy on held-out pairs, and
latency and peak memory against input size, timed interleaved against the teacher in one run."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from flowlab.core.bench import peak_memory
from flowlab.core.benchmarks.timing import fastest_seconds
from flowlab.vision_gen.gendr_pix.data import SRPairs
from flowlab.vision_gen.gendr_pix.sample import Model, restore
from flowlab.vision_gen.kit.fourier import periodic_artifact_energy
from flowlab.vision_gen.kit.quality import psnr_ssim

__all__ = ["cost_profile", "outputs", "sr_quality"]


@torch.no_grad()
def outputs(
    model: Model | None, pairs: SRPairs, *, factor: int, mode: str = "single", weight: float = 1.0, batch: int = 32,
    device: torch.device | str = "cpu",
) -> torch.Tensor:  # fmt: skip
    """The model's restorations (N, 3, S, S) of pairs.x_up, clamped to [-1, 1], on CPU (None: bicubic x_up)."""
    if model is None:
        return pairs.x_up.clone()
    chunks = [restore(model, x.to(device), factor=factor, mode=mode, weight=weight).cpu()
              for x in pairs.x_up.split(batch)]  # fmt: skip
    return torch.cat(chunks).clamp(-1, 1)


def sr_quality(images: torch.Tensor, pairs: SRPairs, *, period: int) -> dict[str, float]:
    """psnr, ssim (means against pairs.hr) and artifact (mean periodic-artifact energy at `period`) of images."""
    quality = psnr_ssim(images, pairs.hr)
    energy = periodic_artifact_energy(images, period=period)
    return {"psnr": quality.mean_psnr, "ssim": quality.mean_ssim, "artifact": float(energy.mean())}


def _call(model: Model, x: torch.Tensor, factor: int, mode: str, weight: float) -> Callable[[], torch.Tensor]:
    def run() -> torch.Tensor:
        with torch.no_grad():
            return restore(model, x, factor=factor, mode=mode, weight=weight)

    return run


def cost_profile(
    models: Mapping[str, Model], sizes: Sequence[int], *, device: torch.device | str = "cpu", repeats: int = 2,
    factor: int, modes: Mapping[str, tuple[str, float]] | None = None,
) -> dict[str, dict[int, dict[str, float]]]:  # fmt: skip
    """{name: {size: {"seconds", "bytes"}}}: the best-of-`repeats` wall seconds (candidates interleaved, after one
    warm-up) and the peak tensor memory of one restoration of a size x size image by each model (its mode and
    weight from `modes`, default single)."""
    device = torch.device(device)
    modes = dict(modes or {})
    out: dict[str, dict[int, dict[str, float]]] = {name: {} for name in models}
    for size in sizes:
        x = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(size)).mul(2).sub(1).to(device)

        runs = {name: _call(model, x, factor, *modes.get(name, ("single", 1.0))) for name, model in models.items()}
        seconds = fastest_seconds(runs, device=device, repeats=repeats)
        for name, fn in runs.items():
            out[name][size] = {"seconds": seconds[name], "bytes": float(peak_memory(fn, device))}
    return out
