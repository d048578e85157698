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
    return classes[method].load(path)
