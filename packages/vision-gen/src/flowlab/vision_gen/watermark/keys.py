"""Loading a saved watermark key folder of any method."""

from __future__ import annotations

import os

from flowlab.vision_gen.watermark.base import LatentWatermark, read_key_folder
from flowlab.vision_gen.watermark.gaussian_shading import GaussianShading
from flowlab.vision_gen.watermark.spherical import SphericalWatermark
from flowlab.vision_gen.watermark.tree_ring import TreeRing


def load_key(path: str | os.PathLike[str]) -> LatentWatermark:
    """Load any saved watermark key folder (the method is read from key.json)."""
    method, _, _ = read_key_folder(path)
    classes = {c.method: c for c in (SphericalWatermark, GaussianShading, TreeRing)}
    if method not in classes:
        raise ValueError(f"key: unknown watermark method {method!r} in {path}")
    try:
        return classes[method].load(path)
    except (KeyError, TypeError, ValueError) as err:  # a config or tensors that do not make a key of the method
        raise ValueError(f"key: {path} is not a valid {method} key: {str(err).removeprefix('key: ')}") from err
