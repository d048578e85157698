"""Training objectives: flow matching (Euclidean, Riemannian, bridge), denoising (DSM, EDM).

The lead adds the other helpers' objectives here:
  from flowlab.core.losses.discrete import masked_diffusion_loss
  from flowlab.core.losses.flow_map import (...the flow-map objectives...)
"""

from flowlab.core.losses.denoising import denoising_score_loss, edm_loss, edm_weight
from flowlab.core.losses.flow_matching import bridge_loss, flow_matching_loss, riemannian_flow_matching_loss

__all__ = [
    "bridge_loss",
    "denoising_score_loss",
    "edm_loss",
    "edm_weight",
    "flow_matching_loss",
    "riemannian_flow_matching_loss",
]
