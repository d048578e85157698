"""Latent watermarks for diffusion models: Spherical Watermark and the Gaussian Shading / Tree-Ring baselines."""

from flowlab.vision_gen.watermark.base import (
    DetectionResult,
    ExtractResult,
    LatentWatermark,
    binomial_threshold,
    read_key_folder,
)
from flowlab.vision_gen.watermark.gaussian_shading import GaussianShading, GaussianShadingConfig
from flowlab.vision_gen.watermark.spherical import SphericalConfig, SphericalWatermark, f2_matrix, haar_orthogonal
from flowlab.vision_gen.watermark.tree_ring import TreeRing, TreeRingConfig, roc_threshold

__all__ = [
    "DetectionResult",
    "ExtractResult",
    "GaussianShading",
    "GaussianShadingConfig",
    "LatentWatermark",
    "SphericalConfig",
    "SphericalWatermark",
    "TreeRing",
    "TreeRingConfig",
    "binomial_threshold",
    "f2_matrix",
    "haar_orthogonal",
    "load_key",
    "read_key_folder",
    "roc_threshold",
]


def load_key(path):
    """Load any saved watermark key folder (the method is read from key.json)."""
    method, _, _ = read_key_folder(path)
    classes = {c.method: c for c in (SphericalWatermark, GaussianShading, TreeRing)}
    if method not in classes:
        raise ValueError(f"key: unknown watermark method {method!r} in {path}")
    return classes[method].load(path)
