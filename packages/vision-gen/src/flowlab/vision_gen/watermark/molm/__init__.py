"""MOLM (mixture of LoRA markers): key-routed LoRA adapters in a frozen decoder, a bit extractor, and its
baselines (HiDDeN-lite post-hoc watermark, Stable-Signature-style per-key fine-tuning)."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.watermark.molm.markers": [
            "DIGITS_BLOCKS",
            "MarkerSet",
            "autoencoder_kl_blocks",
            "key_to_routes",
            "routes_to_key",
        ],
        "flowlab.vision_gen.watermark.molm.model": ["BitExtractor", "MolmConfig", "MolmModel", "key_split"],
        "flowlab.vision_gen.watermark.molm.train": ["TrainConfig", "train_molm"],
        "flowlab.vision_gen.watermark.molm.store": ["load_molm", "load_molm_key", "save_molm", "save_molm_key"],
    },
)
