"""The pixel-aligned Gaussian head: one 3D Gaussian per pixel of every view, placed on the pixel's ray,
xyz = ray origin + depth x ray direction (depth along the camera's z axis), with an isotropic scale in units of
the pixel's footprint at that depth, an opacity and a colour; decoded from the transformer's per-pixel features and
the MV mode's data prediction x0 (the official decoder's feedback)."""

from __future__ import annotations

import math

import torch
from torch import nn

from flowlab.vision_gen.kit.cameras import Rays
from flowlab.vision_gen.kit.splatting import Gaussians

__all__ = ["PixelAlignedGaussianHead"]


class PixelAlignedGaussianHead(nn.Module):
    """features (B, V, F, S, S) and x0 (B, V, 3, S, S) in [-1, 1] -> Gaussians of B scenes with N = V S^2 each.

    Per pixel a linear map (a 1x1 convolution) gives raw depth, scale, opacity and colour: depth = near + (far -
    near) sigmoid(.), scale = max_scale sigmoid(.) depth / focal (pixels -> world units), opacity = sigmoid(. +
    logit 0.1), colour = sigmoid(. + logit of x0's colour) (so it starts at the MV prediction)."""

    def __init__(self, features: int, *, near: float, far: float, focal: float, max_scale: float = 3.0) -> None:
        super().__init__()
        if not 0 < near < far:
            raise ValueError(f"near, far: expected 0 < near < far, got {near}, {far}")
        self.near, self.far, self.focal, self.max_scale = near, far, focal, max_scale
        self.proj = nn.Linear(features + 3, 6)
        nn.init.normal_(self.proj.weight, std=0.02)
        nn.init.zeros_(self.proj.bias)

    def forward(self, features: torch.Tensor, x0: torch.Tensor, rays: Rays) -> Gaussians:
        """features (B, V, F, S, S), x0 (B, V, 3, S, S), rays (V, S^2, 3) each -> Gaussians (B, V S^2, ...)."""
        b, v, _, s, _ = features.shape
        per_pixel = torch.cat((features, x0), dim=2).permute(0, 1, 3, 4, 2).reshape(b, v * s * s, -1)
        raw_depth, raw_scale, raw_opacity, raw_color = self.proj(per_pixel).split((1, 1, 1, 3), dim=-1)
        return self.gaussians(raw_depth[..., 0], raw_scale[..., 0], raw_opacity[..., 0], raw_color,
                              x0.permute(0, 1, 3, 4, 2).reshape(b, v * s * s, 3), rays)  # fmt: skip

    def gaussians(
        self,
        raw_depth: torch.Tensor,
        raw_scale: torch.Tensor,
        raw_opacity: torch.Tensor,
        raw_color: torch.Tensor,
        x0: torch.Tensor,
        rays: Rays,
    ) -> Gaussians:
        """The Gaussians of raw per-pixel outputs: raw_depth, raw_scale, raw_opacity (B, N), raw_color and x0
        (B, N, 3), rays (V, S^2, 3) with N = V S^2; means = origins + depth dirs."""
        depth = self.near + (self.far - self.near) * torch.sigmoid(raw_depth)
        origins, dirs = rays.origins.reshape(-1, 3), rays.dirs.reshape(-1, 3)
        means = origins + depth[..., None] * dirs
        scale = self.max_scale * torch.sigmoid(raw_scale) * depth / self.focal
        opacity = torch.sigmoid(raw_opacity + math.log(0.1 / 0.9))
        color = torch.sigmoid(raw_color + torch.logit(((x0 + 1) / 2).clamp(0.02, 0.98)))
        return Gaussians(means, scale[..., None].expand(*scale.shape, 3), opacity, color)
