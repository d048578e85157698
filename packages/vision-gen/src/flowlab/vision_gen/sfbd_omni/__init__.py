"""SFBD-OMNI (Lu, Yu, Lo; ICLR 2026): learning a clean image distribution from corrupted observations of a black-box
corruption and a few clean images, by alternating posterior reconstruction with a conditional bridge model and
retraining on the reconstructions mixed with the clean set (one-sided entropic OT, solved by alternating
minimisation). Closed forms for Gaussian/linear and finite problems, the SFBD baseline, the evaluation generator."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.vision_gen.sfbd_omni.ambient": ["AmbientDenoiser", "ambient_lite", "ambient_sample"],
        "flowlab.vision_gen.sfbd_omni.closed_form": [
            "discrete_iteration",
            "discrete_posterior",
            "gaussian_closed_form_iteration",
            "kl_divergence",
            "mixture_moments",
        ],
        "flowlab.vision_gen.sfbd_omni.evaluate": ["distribution_measures", "fit_generator", "generate"],
        "flowlab.vision_gen.sfbd_omni.model": ["BridgePosterior", "ImageMLP", "SFBDConfig"],
        "flowlab.vision_gen.sfbd_omni.objective": ["bridge_pair_loss"],
        "flowlab.vision_gen.sfbd_omni.sfbd_baseline": ["SFBDBaseline", "sfbd_denoise", "sfbd_gaussian"],
        "flowlab.vision_gen.sfbd_omni.train": ["SFBDResult", "mixture_batches", "reconstruct", "sfbd_omni"],
    },
)
