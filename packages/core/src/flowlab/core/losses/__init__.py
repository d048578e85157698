"""Training objectives: flow matching (Euclidean, Riemannian, bridge), denoising (DSM, DDPM, EDM), the masked- and
uniform-diffusion NELBOs, distribution-matching distillation (DMD) and the softplus GAN losses, the flow-map
objectives (Lagrangian, Eulerian, progressive, MeanFlow, consistency), each written once for any manifold, and
ECT's ECM loss in EDM noise levels."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.losses.denoising": ["ddpm_loss", "denoising_score_loss", "edm_loss", "edm_weight"],
        "flowlab.core.losses.discrete": ["masked_diffusion_loss", "uniform_diffusion_loss"],
        "flowlab.core.losses.distillation": [
            "dmd_gradient",
            "dmd_loss",
            "fake_score_loss",
            "gan_discriminator_loss",
            "gan_generator_loss",
            "gan_losses",
        ],
        "flowlab.core.losses.ecm": ["ecm_loss", "ecm_target_level", "heun_level_step"],
        "flowlab.core.losses.flow_map": [
            "MeanFlowTarget",
            "consistency_loss",
            "diagonal_fm_loss",
            "esd_loss",
            "lsd_loss",
            "meanflow_loss",
            "meanflow_target",
            "psd_loss",
            "pseudo_huber",
        ],
        "flowlab.core.losses.flow_matching": ["bridge_loss", "flow_matching_loss", "riemannian_flow_matching_loss"],
    },
)
