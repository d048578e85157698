"""The vision shared kit (reused by every vision method): digits, photos and moving-digits data; tiny denoisers; the
shared digits models as cached artifacts (class-conditional rectified-flow, EDM and DDPM teachers, the watermark's
UNet, the tiny autoencoder); diffusion sampling/inversion helpers; diffusers interoperability; the quality kit
(digits-FD with its floor, PRDC, class histograms, PSNR/SSIM, image grids); the attack kit."""

from flowlab.vision_gen.kit.attacks import ATTACKS, SMALL_SUITE, apply_suite, compose, parse_attack
from flowlab.vision_gen.kit.autoencoder import (
    AutoencoderConfig,
    TinyAutoencoder,
    autoencoder_artifact,
    load_autoencoder,
    tiny_autoencoder,
    train_autoencoder,
)
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
    digits_fd,
    digits_feature_net,
    digits_features,
    feature_net_artifact,
)
from flowlab.vision_gen.kit.nets import ClassDiT, DiTField, UNetField, tiny_dit, tiny_unet
from flowlab.vision_gen.kit.photos import PHOTOS, load_photo, load_photos, photo_crops, photo_split, random_crops
from flowlab.vision_gen.kit.quality import (
    ClassHistogram,
    FDResult,
    PairQuality,
    class_histogram,
    digits_prdc,
    fd_floor,
    fd_with_floor,
    image_grid,
    psnr_ssim,
    save_image_grid,
    strip_figure,
)
from flowlab.vision_gen.kit.sampling import generate, invert_to_noise
from flowlab.vision_gen.kit.teachers import (
    FAMILIES,
    DigitsTeacher,
    TeacherConfig,
    digits_teacher,
    teacher_artifact,
    train_teacher,
)
from flowlab.vision_gen.kit.train import (
    ARCHS,
    DigitsDenoiserConfig,
    digits_denoiser,
    digits_denoiser_artifact,
    train_digits_denoiser,
)
from flowlab.vision_gen.kit.video import VideoSet, moving_digits

__all__ = [
    "ARCHS",
    "ATTACKS",
    "FAMILIES",
    "PHOTOS",
    "SMALL_SUITE",
    "AutoencoderConfig",
    "ClassDiT",
    "ClassHistogram",
    "DiTField",
    "DigitsDenoiserConfig",
    "DigitsFeatureNet",
    "DigitsTeacher",
    "FDResult",
    "FeatureNetConfig",
    "ImageSet",
    "PairQuality",
    "TeacherConfig",
    "TinyAutoencoder",
    "UNetField",
    "VideoSet",
    "apply_suite",
    "autoencoder_artifact",
    "class_histogram",
    "compose",
    "digits_denoiser",
    "digits_denoiser_artifact",
    "digits_fd",
    "digits_feature_net",
    "digits_features",
    "digits_prdc",
    "digits_source",
    "digits_split_indices",
    "digits_teacher",
    "fd_floor",
    "fd_with_floor",
    "feature_net_artifact",
    "from_unit",
    "generate",
    "image_grid",
    "invert_to_noise",
    "load_autoencoder",
    "load_digits_images",
    "load_photo",
    "load_photos",
    "moving_digits",
    "parse_attack",
    "photo_crops",
    "photo_split",
    "psnr_ssim",
    "random_crops",
    "save_image_grid",
    "strip_figure",
    "teacher_artifact",
    "tiny_autoencoder",
    "tiny_dit",
    "tiny_unet",
    "to_unit",
    "train_autoencoder",
    "train_digits_denoiser",
    "train_teacher",
]
