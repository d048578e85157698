"""Dual-mode pre-training: L = L_MV + w L_3D on one forward pass of the shared transformer. L_MV is flow matching of
the MV mode's velocity on the noisy rig views (per element); L_3D is the mean squared error of the 3D mode's Gaussians
rendered to the rig and the novel cameras against the ground-truth renders (novel views supervise the geometry)."""

from __future__ import annotations

import torch

from flowlab.core.losses import flow_matching_loss
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.vision_gen.flashworld.model import DualModeModel
from flowlab.vision_gen.kit.cameras import Cameras

__all__ = ["dual_mode_loss"]


def dual_mode_loss(
    model: DualModeModel,
    views: torch.Tensor,
    cameras: Cameras,
    *,
    weight_3d: float = 1.0,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """views (B, V + K, 3, S, S) in [0, 1]: the rig's V views then K more seen by `cameras` (V + K,) (the rig's
    first) -> (L_MV + weight_3d L_3D, {"mv": L_MV, "3d": L_3D}); view 0 is the condition, t ~ U(0, 1)."""
    v = model.config.rig.views
    target = 2 * views - 1
    x1 = target[:, :v]
    dev = generator.device
    eps = torch.randn(x1.shape, generator=generator, device=dev).to(x1)
    t = torch.rand(x1.shape[0], generator=generator, device=dev).to(x1)
    path = AffinePath(CondOT()).sample(eps, x1, t)
    out = model(path.x_t, t, x1[:, 0])
    loss_mv = flow_matching_loss(out.velocity, path) / x1[0].numel()
    gaussians, _ = model.decode(path.x_t, t, out)
    loss_3d = (2 * model.render(gaussians, cameras) - 1 - target).square().mean()
    return loss_mv + weight_3d * loss_3d, {"mv": loss_mv.detach(), "3d": loss_3d.detach()}
