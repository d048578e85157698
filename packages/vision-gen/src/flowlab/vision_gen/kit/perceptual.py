"""A differentiable perceptual distance for digits images (offline, no downloaded LPIPS weights): pixel MSE plus the
MSE of the digits feature net's two conv layers' activations (`kit.metrics.DigitsFeatureNet`).

    loss = digits_perceptual(marked, clean, digits_feature_net())      # (B, 1, H, W) in [-1, 1] each -> scalar
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from flowlab.vision_gen.kit.metrics import DigitsFeatureNet

__all__ = ["conv_features", "digits_perceptual"]


def conv_features(net: DigitsFeatureNet, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (B, 1, 16, 16) in [-1, 1] -> (relu conv1 (B, 32, 16, 16), relu conv2 (B, 64, 8, 8)) of the feature net."""
    h1 = F.relu(net.conv1(x))
    return h1, F.relu(net.conv2(F.max_pool2d(h1, 2)))


def digits_perceptual(
    x: torch.Tensor, y: torch.Tensor, net: DigitsFeatureNet, *, weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
) -> torch.Tensor:
    """w0 MSE(x, y) + w1 MSE(conv1) + w2 MSE(conv2) of images x, y (B, 1, 16, 16) in [-1, 1] -> scalar (0 iff
    x == y at the pixels; gradients flow to x and y, not to the net)."""
    if x.shape != y.shape or x.dim() != 4 or x.shape[1] != 1:
        raise ValueError(
            f"x, y: expected two (B, 1, H, W) batches of one shape, got {tuple(x.shape)}, {tuple(y.shape)}"
        )
    loss = weights[0] * F.mse_loss(x, y)
    for w, fx, fy in zip(weights[1:], conv_features(net, x), conv_features(net, y), strict=True):
        loss = loss + w * F.mse_loss(fx, fy)
    return loss
