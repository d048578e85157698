"""GenDR-Pix (Wang, Zhao, Li, Zhang; ICLR 2026): one-step super-resolution without a VAE. A latent one-step teacher
is distilled in two adversarial stages into a pixel-space student: stage I replaces the encoder by pixel-unshuffle,
stage II the decoder by pixel-shuffle, each stage's discriminator reading the previous stage's features, with
random padding and a masked Fourier-amplitude loss against the shuffle grid's periodic artifacts, and PadCFG at
inference."""

from flowlab.vision_gen.gendr_pix.data import SRPairs, sr_pairs, upsample
from flowlab.vision_gen.gendr_pix.evaluate import cost_profile, outputs, sr_quality
from flowlab.vision_gen.gendr_pix.model import (
    NEGATIVE,
    POSITIVE,
    FeatureDiscriminator,
    GenDRConfig,
    LatentTeacher,
    PixelSR,
    ResidualBlock,
    SRNet,
    StageOne,
)
from flowlab.vision_gen.gendr_pix.pixel_ops import (
    crop_pads,
    pad_cfg,
    pad_to_multiple,
    rand_pad,
    shuffle_out,
    unshuffle_in,
)
from flowlab.vision_gen.gendr_pix.sample import MODES, cfg_pads, restore, upscale
from flowlab.vision_gen.gendr_pix.store import load_sr, save_sr, saved_models
from flowlab.vision_gen.gendr_pix.train import distill_stage1, distill_stage2, train_espcn, train_naive, train_teacher

__all__ = [
    "MODES",
    "NEGATIVE",
    "POSITIVE",
    "FeatureDiscriminator",
    "GenDRConfig",
    "LatentTeacher",
    "PixelSR",
    "ResidualBlock",
    "SRNet",
    "SRPairs",
    "StageOne",
    "cfg_pads",
    "cost_profile",
    "crop_pads",
    "distill_stage1",
    "distill_stage2",
    "load_sr",
    "outputs",
    "pad_cfg",
    "pad_to_multiple",
    "rand_pad",
    "restore",
    "save_sr",
    "saved_models",
    "shuffle_out",
    "sr_pairs",
    "sr_quality",
    "train_espcn",
    "train_naive",
    "train_teacher",
    "unshuffle_in",
    "upsample",
    "upscale",
]
