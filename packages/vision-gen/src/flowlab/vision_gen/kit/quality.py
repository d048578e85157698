"""The quality kit, one call per measure, each returning a named result:

- `fd_with_floor`: digits-FD of samples against a real reference beside its floor, the FD of real images drawn
  from another split at the same sample count (mean and spread over draws); FD is biased at small n, so a
  sample's FD means something only next to the floor at its own n.
- `digits_prdc`: precision / recall / density / coverage in the digits net's 128-d features.
- `class_histogram`: the digits classifier's predicted-class histogram, its entropy and its total-variation
  distance to a target histogram (uniform unless given); accuracy when labels are given.
- `psnr_ssim`: PSNR and SSIM per image pair through scikit-image's reference implementations.
- `image_grid` / `save_image_grid` / `strip_figure`: image grids and labelled strips for reports.

Images are (N, C, H, W) in [-1, 1], as everywhere in the kit.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from flowlab.core.metrics.frechet import frechet_distance
from flowlab.core.metrics.prdc import PRDC, precision_recall_knn
from flowlab.core.validation import check_tensor
from flowlab.vision_gen.kit.data import load_digits_images, to_unit
from flowlab.vision_gen.kit.metrics import FeatureNetConfig, digits_feature_net, digits_features

__all__ = [
    "ClassHistogram",
    "FDResult",
    "PairQuality",
    "class_histogram",
    "digits_prdc",
    "fd_floor",
    "fd_with_floor",
    "image_grid",
    "psnr_ssim",
    "save_image_grid",
    "strip_figure",
]


@dataclass(frozen=True)
class FDResult:
    """fd: the samples' digits-FD against the reference (nan when only the floor was asked for); floor, floor_std:
    mean and standard deviation of the FD of `repeats` real draws of n images against the same reference."""

    fd: float
    floor: float
    floor_std: float
    n: int
    n_reference: int
    repeats: int

    @property
    def excess(self) -> float:
        """fd - floor: what the samples add above the real-vs-real bias at this n."""
        return self.fd - self.floor


@dataclass(frozen=True)
class ClassHistogram:
    """histogram: (10,) predicted-class shares; entropy (nats, log 10 = 2.303 for a uniform one); tv: total
    variation to the target histogram; accuracy: share classified as their label (nan without labels);
    confidence: the mean top-class probability."""

    histogram: tuple[float, ...]
    entropy: float
    tv: float
    accuracy: float
    confidence: float


@dataclass(frozen=True)
class PairQuality:
    """psnr (dB) and ssim per image pair, (N,) each, and their means."""

    psnr: np.ndarray
    ssim: np.ndarray

    @property
    def mean_psnr(self) -> float:
        """The mean PSNR (dB) over the pairs."""
        return float(np.mean(self.psnr))

    @property
    def mean_ssim(self) -> float:
        """The mean SSIM over the pairs."""
        return float(np.mean(self.ssim))


def _images(x: object, name: str) -> torch.Tensor:
    check_tensor(x, name, min_dim=4)
    if x.dim() != 4:
        raise ValueError(f"{name}: expected images (N, C, H, W), got shape {tuple(x.shape)}")
    return x


@lru_cache(maxsize=16)
def _split_features(split: str, size: int, features: FeatureNetConfig | None) -> torch.Tensor:
    """The digit features (N, 128) of a fixed digits split at `size`, computed once per process."""
    return digits_features(load_digits_images(size, split=split).x, features)


_TENSOR_FEATURES: dict[tuple, torch.Tensor] = {}


def _reference_features(reference: torch.Tensor | str, features: FeatureNetConfig | None) -> torch.Tensor:
    """The features of a reference split or image tensor; a tensor's are kept (16 at most) under a digest of its
    values, so a run that measures many sample sets against one reference computes them once."""
    if isinstance(reference, str):
        return _split_features(reference, 16, features)
    reference = _images(reference, "reference")
    values = reference.detach().cpu().contiguous()
    key = (tuple(values.shape), str(values.dtype), hashlib.sha1(values.numpy().tobytes()).hexdigest(), features)
    if key not in _TENSOR_FEATURES:
        if len(_TENSOR_FEATURES) >= 16:
            _TENSOR_FEATURES.pop(next(iter(_TENSOR_FEATURES)))
        _TENSOR_FEATURES[key] = digits_features(values, features)
    return _TENSOR_FEATURES[key].to(reference.device)


def fd_floor(
    n: int,
    *,
    reference: torch.Tensor | str = "test",
    pool: str = "train",
    size: int = 16,
    repeats: int = 5,
    seed: int = 0,
    features: FeatureNetConfig | None = None,
) -> FDResult:
    """The real-vs-real digits-FD at sample count n: FD of n images drawn without replacement from the `pool` split
    (at `size`, processed like samples of that size) against `reference`, over `repeats` seeded draws."""
    pool_feats = _split_features(pool, size, features)
    total = pool_feats.shape[0]
    if not (isinstance(n, int) and 2 <= n <= total):
        raise ValueError(f"n: expected 2 <= n <= {total} (the {pool} split), got {n!r}")
    if not (isinstance(repeats, int) and repeats >= 2):
        raise ValueError(f"repeats: expected an int >= 2, got {repeats!r}")
    ref = _reference_features(reference, features)
    g = torch.Generator().manual_seed(seed)
    fds = [float(frechet_distance(pool_feats[torch.randperm(total, generator=g)[:n]], ref)) for _ in range(repeats)]
    return FDResult(math.nan, float(np.mean(fds)), float(np.std(fds, ddof=1)), n, ref.shape[0], repeats)


def fd_with_floor(
    samples: torch.Tensor,
    reference: torch.Tensor | str = "test",
    *,
    pool: str = "train",
    repeats: int = 5,
    seed: int = 0,
    features: FeatureNetConfig | None = None,
) -> FDResult:
    """digits-FD of samples (N, 1, H, W) against `reference` (images or a digits split) beside `fd_floor` at the
    same N (real images of the samples' size from `pool`)."""
    samples = _images(samples, "samples")
    floor = fd_floor(
        samples.shape[0], reference=reference, pool=pool, size=samples.shape[-1], repeats=repeats, seed=seed,
        features=features,
    )  # fmt: skip
    ref = _reference_features(reference, features)
    fd = float(frechet_distance(digits_features(samples, features), ref.to(samples.device)))
    return FDResult(fd, floor.floor, floor.floor_std, floor.n, floor.n_reference, repeats)


def digits_prdc(
    samples: torch.Tensor,
    reference: torch.Tensor | str = "test",
    *,
    k: int = 3,
    features: FeatureNetConfig | None = None,
) -> PRDC:
    """Precision / recall / density / coverage of samples (N, 1, H, W) against `reference` in digit features."""
    samples = _images(samples, "samples")
    ref = _reference_features(reference, features)
    return precision_recall_knn(ref.to(samples.device), digits_features(samples, features), k=k)


def class_histogram(
    samples: torch.Tensor,
    labels: torch.Tensor | None = None,
    *,
    target: torch.Tensor | None = None,
    features: FeatureNetConfig | None = None,
) -> ClassHistogram:
    """The digits classifier's verdict on samples (N, 1, H, W): histogram, entropy, TV to `target` (10,) (default
    uniform), accuracy against labels (N,) if given, mean confidence."""
    samples = _images(samples, "samples")
    if labels is not None and (not isinstance(labels, torch.Tensor) or tuple(labels.shape) != (samples.shape[0],)):
        raise ValueError(f"labels: expected a tensor of shape ({samples.shape[0]},), one label per sample")
    if target is None:
        target = torch.full((10,), 0.1, dtype=torch.float64)
    check_tensor(target, "target")
    if tuple(target.shape) != (10,) or bool((target < 0).any()) or abs(float(target.sum()) - 1) > 1e-6:
        raise ValueError("target: expected a histogram (10,) of non-negative shares summing to 1")
    net = digits_feature_net(features, device=samples.device)
    with torch.no_grad():
        p = torch.cat([torch.softmax(net(samples[i : i + 512].float()), -1) for i in range(0, len(samples), 512)])
    pred = p.argmax(-1).cpu()
    hist = torch.bincount(pred, minlength=10).double() / pred.shape[0]
    nz = hist[hist > 0]
    accuracy = float((pred == labels.cpu()).double().mean()) if labels is not None else math.nan
    return ClassHistogram(
        histogram=tuple(float(h) for h in hist),
        entropy=float(-(nz * nz.log()).sum()),
        tv=0.5 * float((hist - target.double().cpu()).abs().sum()),
        accuracy=accuracy,
        confidence=float(p.max(-1).values.mean()),
    )


def psnr_ssim(images: torch.Tensor, references: torch.Tensor) -> PairQuality:
    """PSNR and SSIM of each image against its reference, (N, C, H, W) in [-1, 1] each, computed on [0, 1]
    (data_range 1) by `skimage.metrics.peak_signal_noise_ratio` and `structural_similarity` (Gaussian-free 7x7
    window, the library's default; the window shrinks to the image's odd side for images under 7 px)."""
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    images, references = _images(images, "images"), _images(references, "references")
    if images.shape != references.shape:
        raise ValueError(f"references: expected shape {tuple(images.shape)} like images, got {tuple(references.shape)}")
    a = to_unit(images.detach().double()).cpu().numpy()
    b = to_unit(references.detach().double()).cpu().numpy()
    side = min(a.shape[-2:])
    window = min(7, side if side % 2 else side - 1)
    if window < 3:
        raise ValueError(f"images: SSIM needs images of at least 3x3 pixels, got {tuple(images.shape[-2:])}")
    pairs = list(zip(a, b, strict=True))
    psnr = np.array([peak_signal_noise_ratio(r, x, data_range=1.0) for x, r in pairs])
    ssim = np.array([structural_similarity(r, x, data_range=1.0, channel_axis=0, win_size=window) for x, r in pairs])
    return PairQuality(psnr=psnr, ssim=ssim)


def image_grid(images: torch.Tensor, *, ncol: int = 10, pad: int = 1) -> torch.Tensor:
    """(N, C, H, W) in [-1, 1] -> one (C, rows (H + pad) + pad, ncol (W + pad) + pad) image in [0, 1], row-major,
    padded with white."""
    images = _images(images, "images")
    if not (isinstance(ncol, int) and ncol >= 1) or not (isinstance(pad, int) and pad >= 0):
        raise ValueError(f"ncol, pad: expected ncol >= 1 and pad >= 0, got {ncol!r}, {pad!r}")
    n, c, h, w = images.shape
    rows = math.ceil(n / ncol)
    cells = torch.ones(rows * ncol, c, h + pad, w + pad)  # each cell with its bottom and right padding
    cells[:n, :, :h, :w] = to_unit(images.detach().float().cpu())
    grid = cells.reshape(rows, ncol, c, h + pad, w + pad).permute(2, 0, 3, 1, 4).reshape(c, rows * (h + pad), -1)
    return torch.nn.functional.pad(grid, (pad, 0, pad, 0), value=1.0)


def save_image_grid(path: str | os.PathLike[str], images: torch.Tensor, *, ncol: int = 10, scale: int = 4) -> None:
    """`image_grid(images)` as a PNG, each pixel drawn as a scale x scale block (nearest)."""
    from PIL import Image

    grid = image_grid(images, ncol=ncol)
    grid = grid.repeat_interleave(scale, 1).repeat_interleave(scale, 2)
    array = (grid.clamp(0, 1) * 255).round().byte().permute(1, 2, 0).numpy()
    Image.fromarray(array[..., 0] if array.shape[-1] == 1 else array).save(path)


def strip_figure(path: str | os.PathLike[str], rows: Mapping[str, torch.Tensor], *, ncol: int = 10) -> None:
    """A report figure: one labelled row per entry of `rows` (name -> images (N, C, H, W)), saved as a PNG."""
    from flowlab.core.bench import figure

    if not rows:
        raise ValueError("rows: expected at least one named row of images")
    grids = {name: image_grid(imgs[:ncol], ncol=ncol) for name, imgs in rows.items()}
    width = max(g.shape[-1] for g in grids.values())
    with figure(path, nrows=len(grids), size=(0.5 * ncol + 0.5, 0.9 * len(grids) + 0.3), squeeze=False) as (_, axes):
        for ax, (name, grid) in zip(axes[:, 0], grids.items(), strict=True):
            img = grid.permute(1, 2, 0).numpy()
            ax.imshow(img[..., 0] if img.shape[-1] == 1 else img, cmap="gray", vmin=0, vmax=1)
            ax.set_xlim(-0.5, width - 0.5)
            ax.set_title(name, loc="left", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
