"""The vision shared kit (reused by every vision method): digits, photos and moving-digits data; tiny denoisers; the
shared digits models as cached artifacts (class-conditional rectified-flow, EDM and DDPM teachers, the watermark's
UNet, the tiny autoencoder); diffusion sampling/inversion helpers; diffusers interoperability; the quality kit
(digits-FD with its floor, PRDC, class histograms, PSNR/SSIM, image grids); the attack kit; planted shortcuts;
linear probes and bootstrap intervals; model folders on disk (safetensors + JSON); cameras, a differentiable 3D
Gaussian-splatting renderer and Gaussian fits to multi-view images."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.kit.attacks": [
            "ATTACKS",
            "SMALL_SUITE",
            "STRENGTHS",
            "apply_suite",
            "average_residual",
            "compose",
            "forge",
            "inversion_pgd",
            "parse_attack",
            "pgd",
            "regenerate",
            "remove_residual",
            "straight_through",
        ],
        "flowlab.vision_gen.kit.autoencoder": [
            "AutoencoderConfig",
            "TinyAutoencoder",
            "autoencoder_artifact",
            "load_autoencoder",
            "tiny_autoencoder",
            "train_autoencoder",
        ],
        "flowlab.vision_gen.kit.cameras": ["Cameras", "Rays", "orbit_cameras", "pixel_rays", "plucker"],
        "flowlab.vision_gen.kit.data": [
            "ImageSet",
            "digits_source",
            "digits_split_indices",
            "from_unit",
            "load_digits_images",
            "to_unit",
        ],
        "flowlab.vision_gen.kit.gaussian_fit": ["GaussianFit", "fit_gaussians", "render_views"],
        "flowlab.vision_gen.kit.metrics": [
            "DigitsFeatureNet",
            "FeatureNetConfig",
            "digits_fd",
            "digits_feature_net",
            "digits_features",
            "feature_net_artifact",
        ],
        "flowlab.vision_gen.kit.nets": [
            "ClassDiT",
            "CoreUNetField",
            "DiTField",
            "UNetField",
            "core_unet",
            "tiny_dit",
            "tiny_unet",
        ],
        "flowlab.vision_gen.kit.photos": [
            "PHOTOS",
            "load_photo",
            "load_photos",
            "photo_crops",
            "photo_split",
            "random_crops",
        ],
        "flowlab.vision_gen.kit.perceptual": ["conv_features", "digits_perceptual"],
        "flowlab.vision_gen.kit.quality": [
            "ClassHistogram",
            "FDResult",
            "PairQuality",
            "class_histogram",
            "digits_prdc",
            "fd_floor",
            "fd_with_floor",
            "image_grid",
            "psnr_ssim",
            "save_image_grid",
            "strip_figure",
        ],
        "flowlab.vision_gen.kit.sampling": ["batched", "generate", "invert_to_noise"],
        "flowlab.vision_gen.kit.sharpness": ["high_frequency_energy"],
        "flowlab.vision_gen.kit.shortcuts": ["corner_dot", "plant_shortcut"],
        "flowlab.vision_gen.kit.splatting": ["Gaussians", "Render", "gsplat_available", "render_gaussians"],
        "flowlab.vision_gen.kit.store": ["load_weights", "read_config", "save_weights"],
        "flowlab.vision_gen.kit.stats": ["bootstrap_interval", "linear_probe_accuracy"],
        "flowlab.vision_gen.kit.teachers": [
            "FAMILIES",
            "DigitsTeacher",
            "TeacherConfig",
            "digits_teacher",
            "teacher_artifact",
            "train_teacher",
        ],
        "flowlab.vision_gen.kit.train": [
            "ARCHS",
            "DigitsDenoiserConfig",
            "digits_denoiser",
            "digits_denoiser_artifact",
            "train_digits_denoiser",
        ],
        "flowlab.vision_gen.kit.video": ["VideoSet", "moving_digits"],
    },
)
