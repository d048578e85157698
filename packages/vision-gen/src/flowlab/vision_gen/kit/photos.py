"""Offline photographs: the ones shipped inside the scikit-learn and scikit-image wheels, read from the installed files
(never downloaded, never through `pooch`), a split by image, and seeded random crops.

`PHOTOS` lists scikit-learn's two sample images (china, flower: 427x640 RGB) and scikit-image's bundled photographs
(colour and grayscale). Left out: synthetic or graphic images (chessboard, logo, color, phantom, horse, clock_motion),
scanned text (text, page), `microaneurysms` (a 102x102 detail, which would cap every crop size at 102),
`motorcycle_right` (the stereo twin of `motorcycle_left`, which would leak across a split by image) and the non-image
files (lfw_subset.npy, the multipage tifs, the gif, the xml and npz).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from flowlab.core.validation import check_choice
from flowlab.vision_gen.kit.data import ImageSet, from_unit

__all__ = ["PHOTOS", "SPLITS", "load_photo", "load_photos", "photo_crops", "photo_path", "photo_split", "random_crops"]

_SKLEARN = {"china": "china.jpg", "flower": "flower.jpg"}
_SKIMAGE = {
    "astronaut": "astronaut.png",
    "brick": "brick.png",
    "camera": "camera.png",
    "cell": "cell.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "coins": "coins.png",
    "grass": "grass.png",
    "gravel": "gravel.png",
    "hubble_deep_field": "hubble_deep_field.jpg",
    "ihc": "ihc.png",
    "moon": "moon.png",
    "motorcycle_left": "motorcycle_left.png",
    "retina": "retina.jpg",
    "rocket": "rocket.jpg",
}
PHOTOS: tuple[str, ...] = (*_SKLEARN, *_SKIMAGE)
SPLITS = ("train", "val", "test")
_GRAY_WEIGHTS = (0.2125, 0.7154, 0.0721)  # ITU-R BT.709 luma, as skimage.color.rgb2gray


def _check_int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _check_names(names: Sequence[str] | None, minimum: int = 1) -> tuple[str, ...]:
    """`names` as a tuple of distinct known photo names (all of PHOTOS when None)."""
    if names is None:
        return PHOTOS
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ValueError(f"names: expected a sequence of photo names (or None), got {type(names).__name__}")
    unknown = [n for n in names if n not in PHOTOS]
    if unknown:
        raise ValueError(f"names: expected names from PHOTOS {PHOTOS}, got unknown {unknown}")
    if len(set(names)) != len(names) or len(names) < minimum:
        raise ValueError(f"names: expected at least {minimum} distinct photo name(s), got {list(names)}")
    return tuple(names)


def photo_path(name: str) -> Path:
    """The installed file holding photo `name` (inside the scikit-learn or scikit-image wheel)."""
    check_choice(name, PHOTOS, "name")
    if name in _SKLEARN:
        return Path(str(files("sklearn.datasets") / "images" / _SKLEARN[name]))
    return Path(str(files("skimage.data") / _SKIMAGE[name]))


@cache
def _read_rgb(name: str) -> np.ndarray:
    """(H, W, 3) uint8, read-only: grayscale replicated to 3 channels, alpha dropped."""
    path = photo_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"name: the file of photo {name!r} is missing from the installed wheel: {path}")
    with Image.open(path) as im:
        a = np.asarray(im)
    if a.dtype != np.uint8 or a.ndim not in (2, 3):
        raise ValueError(f"name: expected an 8-bit grayscale or colour image in {path}, got {a.dtype} {a.shape}")
    rgb = np.repeat(a[..., None], 3, axis=2) if a.ndim == 2 else a[..., :3]
    rgb = np.ascontiguousarray(rgb)
    rgb.setflags(write=False)
    return rgb


def load_photo(name: str) -> torch.Tensor:
    """Photo `name` as x: (3, H, W) float32 in [0, 1]."""
    return torch.from_numpy(_read_rgb(name).copy()).permute(2, 0, 1).float().div_(255)


def load_photos(names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """{name: (3, H, W) float32 in [0, 1]} for `names` (all of PHOTOS when None), in the given order."""
    return {n: load_photo(n) for n in _check_names(names)}


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    ok = isinstance(fractions, Sequence) and len(fractions) == 3
    ok = ok and all(isinstance(f, int | float) and not isinstance(f, bool) and f > 0 for f in fractions)
    if not ok or not math.isclose(sum(fractions), 1.0, abs_tol=1e-9):
        raise ValueError(
            f"fractions: expected three positive (train, val, test) fractions summing to 1, got {fractions}"
        )
    return tuple(float(f) for f in fractions)


def photo_split(
    names: Sequence[str] | None = None, *, seed: int = 0, fractions: Sequence[float] = (0.6, 0.2, 0.2)
) -> dict[str, tuple[str, ...]]:
    """Split photos BY IMAGE into {"train", "val", "test"}: disjoint, covering `names`, each non-empty, fixed by `seed`.

    val and test get round(fraction * len(names)) photos (at least one each), train the rest; each split keeps the
    order of `names`.
    """
    names = _check_names(names, minimum=3)
    _check_int(seed, "seed", 0)
    _, f_val, f_test = _check_fractions(fractions)
    n = len(names)
    n_val, n_test = max(1, round(f_val * n)), max(1, round(f_test * n))
    if n - n_val - n_test < 1:
        raise ValueError(f"fractions: expected a non-empty train split of {n} photos, got {fractions}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    parts = {"val": order[:n_val], "test": order[n_val : n_val + n_test], "train": order[n_val + n_test :]}
    return {k: tuple(names[i] for i in sorted(parts[k])) for k in SPLITS}


def _check_images(images: Sequence[torch.Tensor] | Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """The photos of `images` as a list of (C, H, W) floating tensors sharing C, dtype and device."""
    if isinstance(images, Mapping):
        images = list(images.values())
    if not isinstance(images, Sequence) or len(images) == 0:
        raise ValueError(f"images: expected a non-empty list or dict of (C, H, W) tensors, got {type(images).__name__}")
    first = images[0]
    for i, im in enumerate(images):
        if not isinstance(im, torch.Tensor) or im.dim() != 3 or not im.is_floating_point():
            what = f"{im.dtype} {tuple(im.shape)}" if isinstance(im, torch.Tensor) else type(im).__name__
            raise ValueError(f"images: expected floating (C, H, W) tensors, got {what} at position {i}")
        if im.shape[0] != first.shape[0] or im.dtype != first.dtype or im.device != first.device:
            raise ValueError(f"images: expected one channel count, dtype and device, photo {i} differs from photo 0")
    if first.shape[0] not in (1, 3):
        raise ValueError(f"images: expected 1 or 3 channels, got {first.shape[0]}")
    return list(images)


def _windows(images: list[torch.Tensor], size: int, n: int, generator: torch.Generator) -> torch.Tensor:
    """(n, 3) int64 on the photos' device: (photo index, top, left), the photo uniform, then the offset uniform."""
    _check_int(size, "size", 1)
    _check_int(n, "n", 1)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator: expected a torch.Generator, got {type(generator).__name__}")
    smallest = min(min(im.shape[1:]) for im in images)
    if size > smallest:
        raise ValueError(f"size: expected a crop size <= the smallest photo side {smallest}, got {size}")
    which = torch.randint(len(images), (n,), generator=generator, device=generator.device)
    u = torch.rand(n, 2, generator=generator, device=generator.device)
    room = torch.tensor([im.shape[1:] for im in images], device=generator.device)[which] - size + 1
    offsets = torch.minimum((u * room).floor().long(), room - 1)  # room: (n, 2) valid offsets per axis
    return torch.cat([which[:, None], offsets], dim=1).to(images[0].device)


def _cut(images: list[torch.Tensor], windows: torch.Tensor, size: int) -> torch.Tensor:
    """images: [(C, H, W)], windows: (n, 3) (photo, top, left) -> (n, C, size, size), batched per photo."""
    step = torch.arange(size, device=windows.device)
    out = images[0].new_empty(len(windows), images[0].shape[0], size, size)
    for i, im in enumerate(images):
        pick = (windows[:, 0] == i).nonzero().squeeze(1)
        rows = (windows[pick, 1, None] + step)[:, :, None]  # (k, size, 1)
        cols = (windows[pick, 2, None] + step)[:, None, :]  # (k, 1, size)
        out[pick] = im[:, rows, cols].transpose(0, 1)
    return out


def _gray(x: torch.Tensor) -> torch.Tensor:
    """x: (n, 3, h, w) -> (n, 1, h, w), BT.709 luma; a 1-channel x is returned as is."""
    if x.shape[1] == 1:
        return x
    return torch.einsum("nchw,c->nhw", x, x.new_tensor(_GRAY_WEIGHTS))[:, None]


def _check_bool(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected a bool, got {value!r}")
    return value


def random_crops(
    images: Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
    size: int,
    n: int,
    *,
    generator: torch.Generator,
    grayscale: bool = False,
) -> torch.Tensor:
    """n random size x size windows of `images` (each (C, H, W)): the photo uniformly, then the offset uniformly.

    Returns (n, C, size, size) with the values of `images` (C = 1 when `grayscale`: BT.709 luma of RGB photos).
    """
    images = _check_images(images)
    _check_bool(grayscale, "grayscale")
    crops = _cut(images, _windows(images, size, n, generator), size)
    return _gray(crops) if grayscale else crops


def photo_crops(
    split: str = "train", size: int = 32, n: int = 256, *, seed: int = 0, grayscale: bool = False
) -> ImageSet:
    """n random crops of the photos of one split of the fixed `photo_split()` (seed 0), drawn from `seed`.

    x: (n, C, size, size) in [-1, 1] (C = 3, or 1 when `grayscale`); y: (n,) int64, the index of the source photo in
    `photo_split()[split]`.
    """
    check_choice(split, SPLITS, "split")
    _check_int(seed, "seed", 0)
    _check_bool(grayscale, "grayscale")
    photos = [load_photo(name) for name in photo_split()[split]]
    windows = _windows(photos, size, n, torch.Generator().manual_seed(seed))
    crops = _cut(photos, windows, size)
    return ImageSet(x=from_unit(_gray(crops) if grayscale else crops), y=windows[:, 0].clone())
