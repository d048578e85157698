"""The vision shared kit: digits data, tiny denoisers and the shared digits teacher (a cached artifact), diffusion
sampling/inversion helpers, diffusers interoperability, the digits feature net and digits-FD, and the attack kit
(reused by every vision method)."""

from flowlab.vision_gen.kit.attacks import ATTACKS, SMALL_SUITE, apply_suite, compose, parse_attack
from flowlab.vision_gen.kit.data import (
    ImageSet,
    digits_source,
    digits_split_indices,
    from_unit,
    load_digits_images,
    to_unit,
)
from flowlab.vision_gen.kit.metrics import (
    DigitsFeatureNet,
    FeatureNetConfig,
    classifier_scores,
    digits_fd,
    digits_feature_net,
    feature_net_artifact,
)
from flowlab.vision_gen.kit.nets import DiTField, UNetField, tiny_dit, tiny_unet
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.kit.train import (
    ARCHS,
    DigitsDenoiserConfig,
    digits_denoiser,
    digits_denoiser_artifact,
    train_digits_denoiser,
)

__all__ = [
    "ARCHS",
    "ATTACKS",
    "SMALL_SUITE",
    "DiTField",
    "DigitsDenoiserConfig",
    "DigitsFeatureNet",
    "FeatureNetConfig",
    "ImageSet",
    "UNetField",
    "apply_suite",
    "classifier_scores",
    "compose",
    "digits_denoiser",
    "digits_denoiser_artifact",
    "digits_fd",
    "digits_feature_net",
    "digits_source",
    "digits_split_indices",
    "feature_net_artifact",
    "from_unit",
    "generate",
    "invert_to_noise",
    "load_digits_images",
    "parse_attack",
    "tiny_dit",
    "tiny_unet",
    "to_unit",
    "train_digits_denoiser",
]
