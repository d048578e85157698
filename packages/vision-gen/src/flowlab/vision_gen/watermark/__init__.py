"""Latent watermarks for diffusion models: Spherical Watermark and the Gaussian Shading / Tree-Ring baselines."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.watermark.base": [
            "DetectionResult",
            "ExtractResult",
            "LatentWatermark",
            "binomial_threshold",
            "read_key_folder",
        ],
        "flowlab.vision_gen.watermark.keys": ["Marked", "embed_with_key", "load_key", "read_with_key"],
        "flowlab.vision_gen.watermark.gaussian_shading": ["GaussianShading", "GaussianShadingConfig"],
        "flowlab.vision_gen.watermark.spherical": [
            "SphericalConfig",
            "SphericalWatermark",
            "f2_matrix",
            "haar_orthogonal",
        ],
        "flowlab.vision_gen.watermark.tree_ring": ["TreeRing", "TreeRingConfig", "roc_threshold"],
    },
)
