"""Fit 3D Gaussians to multi-view images by gradient descent through the splatting renderer: the reconstruction
step of a generate-then-reconstruct pipeline, and a multi-view consistency metric (the photometric residual of the
best few-Gaussian scene that explains all views: near 0 for the renders of one 3D scene, large for views that no
scene explains). Batched over scenes: every scene has its own Gaussians, and Adam's per-element steps keep the
scenes independent.

    fit = fit_gaussians(views, cams, n_gaussians=6, steps=200, generator=torch.Generator().manual_seed(0))
    fit.residual                                  # (B,) mean squared error of the fitted renders
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from flowlab.vision_gen.kit.cameras import Cameras
from flowlab.vision_gen.kit.splatting import Gaussians, render_gaussians

__all__ = ["GaussianFit", "fit_gaussians", "render_views"]


@dataclass(frozen=True)
class GaussianFit:
    """The fitted `gaussians` (B scenes), their `renders` (B, V, C, H, W) at the fitted cameras and the
    `residual` (B,): the mean squared error of the renders against the views."""

    gaussians: Gaussians
    renders: torch.Tensor
    residual: torch.Tensor


def render_views(gaussians: Gaussians, cameras: Cameras, *, size: int, **kw) -> torch.Tensor:
    """Every scene through every camera: B scenes, cameras (V,) -> (B, V, C, size, size) images."""
    b, v = gaussians.means.shape[0], cameras.shape[0]
    out = render_gaussians(gaussians.repeat(v), cameras.expand(b, v).reshape(b * v), size=size, **kw)
    return out.image.reshape(b, v, *out.image.shape[1:])


def fit_gaussians(
    views: torch.Tensor,
    cameras: Cameras,
    *,
    n_gaussians: int,
    steps: int = 200,
    lr: float = 0.05,
    init_radius: float = 0.6,
    init_scale: float = 0.2,
    generator: torch.Generator,
) -> GaussianFit:
    """Fit `n_gaussians` isotropic Gaussians per scene to views (B, V, C, H, W) in [0, 1] seen by cameras (V,):
    means start uniform in [-init_radius, init_radius]^3 (from `generator`), scales at `init_scale`, opacities and
    colours at 0.5; `steps` Adam steps at `lr` on the summed per-scene squared error. Runs with gradients even under
    `torch.inference_mode()`; the result is detached."""
    if not isinstance(views, torch.Tensor) or views.dim() != 5 or views.shape[-1] != views.shape[-2]:
        raise ValueError(f"views: expected (B, V, C, H, H) images, got {getattr(views, 'shape', type(views))}")
    if not isinstance(cameras, Cameras) or tuple(cameras.shape) != (views.shape[1],):
        raise ValueError(f"cameras: expected Cameras of batch shape ({views.shape[1]},)")
    if not bool(torch.isfinite(views).all()):
        raise ValueError("views: expected finite values")
    for name, value in (("n_gaussians", n_gaussians), ("steps", steps)):
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    b, _, c, size, _ = views.shape
    device = views.device
    with torch.inference_mode(False), torch.enable_grad():
        target, cams = views.clone(), Cameras(*(x.clone() for x in (cameras.K, cameras.R, cameras.t)))
        u = torch.rand(b, n_gaussians, 3, generator=generator, device=generator.device).to(device, views.dtype)
        means = ((2 * u - 1) * init_radius).requires_grad_()
        log_scale = torch.full((b, n_gaussians, 1), math.log(init_scale), device=device).requires_grad_()
        opacity = torch.zeros(b, n_gaussians, device=device, requires_grad=True)
        color = torch.zeros(b, n_gaussians, c, device=device, requires_grad=True)
        params = (means, log_scale, opacity, color)
        opt = torch.optim.Adam(params, lr=lr)

        def gaussians() -> Gaussians:
            return Gaussians(means, log_scale.exp().expand(-1, -1, 3), opacity.sigmoid(), color.sigmoid())

        for _ in range(steps):
            err = (render_views(gaussians(), cams, size=size) - target).square().flatten(1).mean(1)
            opt.zero_grad(set_to_none=True)
            err.sum().backward()
            opt.step()
        with torch.no_grad():
            fitted = Gaussians(*(x.detach() for x in (means, log_scale.exp().expand(-1, -1, 3), opacity.sigmoid(),
                                                      color.sigmoid())))  # fmt: skip
            renders = render_views(fitted, cams, size=size)
            residual = (renders - target).square().flatten(1).mean(1)
    return GaussianFit(fitted, renders, residual)
