"""SFBD-OMNI's training objective: a clean (or reconstructed) image, a fresh corruption of it, and the conditional
bridge loss from the observation's image part to the image, as an endpoint regression."""

from __future__ import annotations

import torch

from flowlab.core.distributions import sample_times
from flowlab.core.losses import bridge_loss
from flowlab.core.paths.bridge import AugmentedBridgePath
from flowlab.vision_gen.kit.corruptions import Corruption
from flowlab.vision_gen.sfbd_omni.model import BridgePosterior

__all__ = ["bridge_pair_loss"]


def bridge_pair_loss(
    model: BridgePosterior,
    x: torch.Tensor,
    corruption: Corruption,
    path: AugmentedBridgePath,
    *,
    generator: torch.Generator,
) -> torch.Tensor:
    """x: (B, C, H, W) images; draws y ~ r(. | x) afresh (never a stale y for a reconstructed x), t ~ U[0, 1] and
    the bridge noise, and returns mean ||x_1_theta(x_t, t, y) - x||^2: the core `bridge_loss` on the drift
    (x - x_t) / (1 - t) weighted by (1 - t)^2, which is the endpoint error without the 1 / (1 - t)^2 blow-up."""
    y = corruption.sample(x, generator=generator)
    t = sample_times(x.shape[0], generator=generator, device=x.device, dtype=x.dtype)
    return bridge_loss(model, x, corruption.start(y), path=path, generator=generator, t=t, weight=(1 - t) ** 2, obs=y)
