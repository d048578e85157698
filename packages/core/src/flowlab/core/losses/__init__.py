"""Training objectives: flow matching (Euclidean, Riemannian, bridge), denoising (DSM, DDPM, EDM), the masked- and
uniform-diffusion NELBOs, distribution-matching distillation (DMD) and the softplus GAN losses, the flow-map
objectives (Lagrangian, Eulerian, progressive, MeanFlow, consistency), each written once for any manifold, and
ECT's ECM loss in EDM noise levels."""

from flowlab.core.losses.denoising import ddpm_loss, denoising_score_loss, edm_loss, edm_weight
from flowlab.core.losses.discrete import masked_diffusion_loss, uniform_diffusion_loss
from flowlab.core.losses.distillation import (
    dmd_gradient,
    dmd_loss,
    fake_score_loss,
    gan_discriminator_loss,
    gan_generator_loss,
    gan_losses,
)
from flowlab.core.losses.ecm import ecm_loss, ecm_target_level, heun_level_step
from flowlab.core.losses.flow_map import (
    MeanFlowTarget,
    consistency_loss,
    diagonal_fm_loss,
    esd_loss,
    lsd_loss,
    meanflow_loss,
    meanflow_target,
    psd_loss,
    pseudo_huber,
)
from flowlab.core.losses.flow_matching import bridge_loss, flow_matching_loss, riemannian_flow_matching_loss

__all__ = [
    "MeanFlowTarget",
    "bridge_loss",
    "consistency_loss",
    "ddpm_loss",
    "denoising_score_loss",
    "diagonal_fm_loss",
    "dmd_gradient",
    "dmd_loss",
    "ecm_loss",
    "ecm_target_level",
    "edm_loss",
    "edm_weight",
    "esd_loss",
    "fake_score_loss",
    "flow_matching_loss",
    "gan_discriminator_loss",
    "gan_generator_loss",
    "gan_losses",
    "heun_level_step",
    "lsd_loss",
    "masked_diffusion_loss",
    "meanflow_loss",
    "meanflow_target",
    "psd_loss",
    "pseudo_huber",
    "riemannian_flow_matching_loss",
    "uniform_diffusion_loss",
]
