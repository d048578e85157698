"""The evaluation protocol of generated multi-view scenes against held-out ground truth:

- consistency: the photometric residual of `fit_gaussians` (a few Gaussians fitted to the V generated views by Adam):
  near 0 when one 3D scene explains every view; consistency_rel: the same over the views' mean squared intensity
  (a dim output cannot look consistent by being dark);
- sharpness: high-frequency energy of the generated views over that of real renders (1 = as sharp as real);
- fd: Fréchet distance of 4x4 average-pooled views (48 numbers each) against the real test renders' (a pixel-space
  stand-in for a learned feature net, comparable within one run);
- psnr_novel: PSNR of the scene's Gaussians rendered at the novel cameras against the ground truth there (the 3D
  mode's own Gaussians; a Gaussian fit to the views for the MV mode);
- nfe and seconds per scene (timed by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from flowlab.core.metrics import frechet_distance
from flowlab.vision_gen.kit.cameras import Cameras
from flowlab.vision_gen.kit.gaussian_fit import fit_gaussians, render_views
from flowlab.vision_gen.kit.sharpness import high_frequency_energy
from flowlab.vision_gen.kit.splatting import Gaussians

__all__ = ["EvalSettings", "pooled_features", "psnr", "scene_metrics"]


@dataclass(frozen=True)
class EvalSettings:
    """The fit behind the consistency metric: `fit_gaussians` Gaussians, `fit_steps` Adam steps at `fit_lr`."""

    fit_gaussians: int = 6
    fit_steps: int = 150
    fit_lr: float = 0.05


def pooled_features(views: torch.Tensor) -> torch.Tensor:
    """views (B, V, 3, S, S) -> (B V, 48): each view average-pooled to 4 x 4."""
    flat = views.flatten(0, 1)
    return torch.nn.functional.adaptive_avg_pool2d(flat, 4).flatten(1)


def psnr(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample PSNR in dB of images in [0, 1]: (B, ...) pairs -> (B,)."""
    mse = (x - y).square().flatten(1).mean(1).clamp_min(1e-10)
    return -10 * torch.log10(mse)


def scene_metrics(
    views: torch.Tensor,
    gaussians: Gaussians | None,
    truth: torch.Tensor,
    real: torch.Tensor,
    rig: Cameras,
    novel: Cameras,
    settings: EvalSettings,
    *,
    generator: torch.Generator,
) -> dict[str, float]:
    """Generated views (B, V, 3, S, S) in [-1, 1] with their Gaussians (None: use the fitted ones) against `truth`
    (B, V + V_novel, 3, S, S) in [0, 1] (the same scenes' renders) and `real` (M, V + V_novel, 3, S, S) real renders;
    rig (V,), novel (V_novel,) cameras -> consistency, consistency_rel, sharpness, fd, psnr_novel, psnr_view0 (the
    conditioning view)."""
    v = rig.shape[0]
    images = ((views + 1) / 2).clamp(0, 1)
    fit = fit_gaussians(images, rig, n_gaussians=settings.fit_gaussians, steps=settings.fit_steps,
                        lr=settings.fit_lr, generator=generator)  # fmt: skip
    scene = fit.gaussians if gaussians is None else gaussians
    with torch.no_grad():
        novel_views = render_views(scene, novel, size=views.shape[-1]).clamp(0, 1)
    sharp = high_frequency_energy(images.flatten(0, 1)).mean() / high_frequency_energy(real[:, :v].flatten(0, 1)).mean()
    return {
        "consistency": float(fit.residual.mean()),
        "consistency_rel": float((fit.residual / images.square().flatten(1).mean(1).clamp_min(1e-8)).mean()),
        "sharpness": float(sharp),
        "fd": float(frechet_distance(pooled_features(images), pooled_features(real[:, :v]))),
        "psnr_novel": float(psnr(novel_views, truth[:, v:]).mean()),
        "psnr_view0": float(psnr(images[:, 0], truth[:, 0]).mean()),
    }
