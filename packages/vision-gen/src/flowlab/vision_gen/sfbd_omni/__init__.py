"""SFBD-OMNI (Lu, Yu, Lo; ICLR 2026): learning a clean image distribution from corrupted observations of a black-box
corruption and a few clean images, by alternating posterior reconstruction with a conditional bridge model and
retraining on the reconstructions mixed with the clean set (one-sided entropic OT, solved by alternating
minimisation). Closed forms for Gaussian/linear and finite problems, the SFBD baseline, the evaluation generator."""

from flowlab.vision_gen.sfbd_omni.ambient import AmbientDenoiser, ambient_lite, ambient_sample
from flowlab.vision_gen.sfbd_omni.closed_form import (
    discrete_iteration,
    discrete_posterior,
    gaussian_closed_form_iteration,
    kl_divergence,
    mixture_moments,
)
from flowlab.vision_gen.sfbd_omni.evaluate import distribution_measures, fit_generator, generate
from flowlab.vision_gen.sfbd_omni.model import BridgePosterior, ImageMLP, SFBDConfig
from flowlab.vision_gen.sfbd_omni.objective import bridge_pair_loss
from flowlab.vision_gen.sfbd_omni.sfbd_baseline import SFBDBaseline, sfbd_denoise, sfbd_gaussian
from flowlab.vision_gen.sfbd_omni.train import SFBDResult, mixture_batches, reconstruct, sfbd_omni

__all__ = [
    "AmbientDenoiser",
    "BridgePosterior",
    "ImageMLP",
    "SFBDBaseline",
    "SFBDConfig",
    "SFBDResult",
    "ambient_lite",
    "ambient_sample",
    "bridge_pair_loss",
    "discrete_iteration",
    "discrete_posterior",
    "distribution_measures",
    "fit_generator",
    "gaussian_closed_form_iteration",
    "generate",
    "kl_divergence",
    "mixture_batches",
    "mixture_moments",
    "reconstruct",
    "sfbd_denoise",
    "sfbd_gaussian",
    "sfbd_omni",
]
