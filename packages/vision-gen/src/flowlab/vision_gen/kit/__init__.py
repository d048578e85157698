"""The vision shared kit: digits data, tiny denoisers, diffusion sampling/inversion helpers, diffusers
interoperability, the digits feature net and digits-FD, and the attack kit (reused by every vision method)."""

from flowlab.vision_gen.kit.attacks import ATTACKS, SMALL_SUITE, apply_suite, compose, parse_attack
from flowlab.vision_gen.kit.data import ImageSet, digits_split_indices, from_unit, load_digits_images, to_unit
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet, classifier_scores, digits_fd, digits_feature_net
from flowlab.vision_gen.kit.nets import DiTField, UNetField, tiny_dit, tiny_unet
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.kit.train import ARCHS, cache_dir, train_digits_denoiser

__all__ = [
    "ARCHS",
    "ATTACKS",
    "SMALL_SUITE",
    "DiTField",
    "DigitsFeatureNet",
    "ImageSet",
    "UNetField",
    "apply_suite",
    "cache_dir",
    "classifier_scores",
    "compose",
    "digits_fd",
    "digits_feature_net",
    "digits_split_indices",
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
