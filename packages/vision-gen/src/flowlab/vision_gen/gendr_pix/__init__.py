"""GenDR-Pix (Wang, Zhao, Li, Zhang; ICLR 2026): one-step super-resolution without a VAE. A latent one-step teacher
is distilled in two adversarial stages into a pixel-space student: stage I replaces the encoder by pixel-unshuffle,
stage II the decoder by pixel-shuffle, each stage's discriminator reading the previous stage's features, with
random padding and a masked Fourier-amplitude loss against the shuffle grid's periodic artifacts, and PadCFG at
inference."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.gendr_pix.data": ["SRPairs", "sr_pairs", "upsample"],
        "flowlab.vision_gen.gendr_pix.evaluate": ["cost_profile", "outputs", "sr_quality"],
        "flowlab.vision_gen.gendr_pix.model": [
            "NEGATIVE",
            "POSITIVE",
            "FeatureDiscriminator",
            "GenDRConfig",
            "LatentTeacher",
            "PixelSR",
            "ResidualBlock",
            "SRNet",
            "StageOne",
        ],
        "flowlab.vision_gen.gendr_pix.pixel_ops": [
            "crop_pads",
            "pad_cfg",
            "pad_to_multiple",
            "rand_pad",
            "shuffle_out",
            "unshuffle_in",
        ],
        "flowlab.vision_gen.gendr_pix.sample": ["MODES", "cfg_pads", "restore", "upscale"],
        "flowlab.vision_gen.gendr_pix.store": ["load_sr", "save_sr", "saved_models"],
        "flowlab.vision_gen.gendr_pix.train": [
            "distill_stage1",
            "distill_stage2",
            "train_espcn",
            "train_naive",
            "train_teacher",
        ],
    },
)
