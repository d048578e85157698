"""The dual-mode multi-view model: one transformer of the core's adaLN-Zero DiT blocks over the patch tokens of all
V views (noisy views, the conditioning view at its slot with a mask channel, and per-pixel Plücker rays), with two
outputs from one forward pass: the MV mode's velocity of the views, and per-pixel features that the pixel-aligned
head turns into 3D Gaussians, rendered to the rig's cameras in 3D mode.

Core time: x_t = t x_1 + (1 - t) eps, t = 1 data; views in [-1, 1] (renders r in [0, 1] are 2 r - 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.nets.dit import DiTBlock
from flowlab.core.nets.embeddings import SinusoidalEmbedding
from flowlab.vision_gen.flashworld.head import PixelAlignedGaussianHead
from flowlab.vision_gen.flashworld.scenes import RigConfig, rig_cameras
from flowlab.vision_gen.kit.cameras import Cameras, Rays, pixel_rays, plucker
from flowlab.vision_gen.kit.gaussian_fit import render_views
from flowlab.vision_gen.kit.splatting import Gaussians

__all__ = ["DualModeConfig", "DualModeModel", "MVField", "MVOutput", "ThreeDOutput", "check_views"]


@dataclass(frozen=True)
class DualModeConfig(Config):
    """The transformer over the rig's views: patches of `patch` pixels, width `dim`, `depth` blocks of `heads`
    heads, `features` per-pixel feature channels for the Gaussian head (depths in [near, far], scales up to
    `max_scale` pixels)."""

    rig: RigConfig = field(default_factory=RigConfig)
    patch: int = 2
    dim: int = 96
    depth: int = 4
    heads: int = 4
    features: int = 16
    near: float = 1.0
    far: float = 4.0
    max_scale: float = 3.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.patch < 1 or self.rig.size % self.patch:
            raise ValueError(f"patch: expected a divisor of the image size {self.rig.size}, got {self.patch}")
        if self.dim % self.heads or self.dim % 4:
            raise ValueError(f"dim, heads: expected dim divisible by heads and 4, got {self.dim}, {self.heads}")
        if min(self.depth, self.features) < 1:
            raise ValueError(f"depth, features: expected >= 1, got {self.depth}, {self.features}")


@dataclass(frozen=True)
class MVOutput:
    """One forward pass: the MV mode's `velocity` (B, V, 3, S, S) and the per-pixel `features` (B, V, F, S, S)."""

    velocity: torch.Tensor
    features: torch.Tensor


@dataclass(frozen=True)
class ThreeDOutput:
    """The 3D mode at (x_t, t): the `gaussians` (B scenes of V S^2), their `renders` (B, V, 3, S, S) in [-1, 1] at
    the rig's cameras (the 3D data prediction) and the MV mode's data prediction `x0_mv` of the same pass."""

    gaussians: Gaussians
    renders: torch.Tensor
    x0_mv: torch.Tensor


def check_views(x: object, config: DualModeConfig, name: str = "x") -> torch.Tensor:
    """x must be finite float views (B, V, 3, S, S) of the rig; ValueError naming `name` otherwise."""
    shape = (config.rig.views, 3, config.rig.size, config.rig.size)
    if not isinstance(x, torch.Tensor) or x.dim() != 5 or tuple(x.shape[1:]) != shape or not x.is_floating_point():
        raise ValueError(f"{name}: expected float views (B, {', '.join(map(str, shape))}), got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")  # fmt: skip
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: expected finite values")
    return x


class DualModeModel(nn.Module):
    """x (B, V, 3, S, S), t (B,), image (B, 3, S, S) the conditioning view 0 -> `MVOutput` (forward), or the MV
    velocity alone (`velocity`), or the 3D mode's Gaussians and renders (`predict_3d`)."""

    def __init__(self, config: DualModeConfig) -> None:
        super().__init__()
        self.config = config
        rig, p = config.rig, config.patch
        cameras = rig_cameras(rig)
        for name in ("K", "R", "t"):
            self.register_buffer(f"camera_{name}", getattr(cameras, name), persistent=False)
        rays = pixel_rays(cameras, rig.size)
        self.register_buffer("ray_origins", rays.origins.contiguous(), persistent=False)
        self.register_buffer("ray_dirs", rays.dirs, persistent=False)
        ray_map = plucker(rays).reshape(rig.views, rig.size, rig.size, 6).permute(0, 3, 1, 2)
        self.register_buffer("ray_map", ray_map, persistent=False)  # (V, 6, S, S)
        self.grid = rig.size // p
        tokens = rig.views * self.grid**2
        self.embed = nn.Linear(13 * p * p, config.dim)
        self.pos = nn.Parameter(0.02 * torch.randn(tokens, config.dim))
        self.time = nn.Sequential(SinusoidalEmbedding(config.dim, scale=1000.0), nn.Linear(config.dim, config.dim),
                                  nn.SiLU(), nn.Linear(config.dim, config.dim))  # fmt: skip
        self.blocks = nn.ModuleList(DiTBlock(config.dim, config.heads) for _ in range(config.depth))
        self.norm = nn.LayerNorm(config.dim, elementwise_affine=False, eps=1e-6)
        self.out = nn.Linear(config.dim, p * p * (3 + config.features))
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.head = PixelAlignedGaussianHead(config.features, near=config.near, far=config.far,
                                             focal=rig.focal * rig.size, max_scale=config.max_scale)  # fmt: skip

    @property
    def cameras(self) -> Cameras:
        """The rig's cameras (V,) on the model's device."""
        return Cameras(self.camera_K, self.camera_R, self.camera_t)

    def _patchify(self, x: torch.Tensor) -> torch.Tensor:
        """(B, V, C, S, S) -> (B, V g^2, C p^2) with g = S / p, views-major, then patch rows and columns."""
        b, v, c, _, _ = x.shape
        p, g = self.config.patch, self.grid
        return x.reshape(b, v, c, g, p, g, p).permute(0, 1, 3, 5, 2, 4, 6).reshape(b, v * g * g, c * p * p)

    def _unpatchify(self, tokens: torch.Tensor, c: int) -> torch.Tensor:
        """(B, V g^2, C p^2) -> (B, V, C, S, S)."""
        b, v, p, g = tokens.shape[0], self.config.rig.views, self.config.patch, self.grid
        return tokens.reshape(b, v, g, g, c, p, p).permute(0, 1, 4, 2, 5, 3, 6).reshape(b, v, c, g * p, g * p)

    def forward(self, x: torch.Tensor, t: torch.Tensor, image: torch.Tensor) -> MVOutput:
        """x (B, V, 3, S, S), t (B,), image (B, 3, S, S) -> `MVOutput`."""
        b, v, _, s, _ = x.shape
        slot = torch.zeros_like(x)
        slot[:, 0] = image
        mask = torch.zeros(b, v, 1, s, s, dtype=x.dtype, device=x.device)
        mask[:, 0] = 1.0
        inputs = torch.cat((x, slot, mask, self.ray_map.to(x.dtype).expand(b, -1, -1, -1, -1)), dim=2)
        h = self.embed(self._patchify(inputs)) + self.pos
        c = self.time(t)
        for block in self.blocks:
            h = block(h, c)
        out = self._unpatchify(self.out(self.norm(h)), 3 + self.config.features)
        return MVOutput(out[:, :, :3], out[:, :, 3:])

    def velocity(self, x: torch.Tensor, t: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """The MV mode's velocity (B, V, 3, S, S) at (x, t) given the conditioning image."""
        return self(x, t, image).velocity

    def predict_3d(self, x: torch.Tensor, t: torch.Tensor, image: torch.Tensor) -> ThreeDOutput:
        """The 3D mode at (x, t): pixel-aligned Gaussians from the features and the (detached) MV data prediction,
        rendered to the rig's cameras."""
        out = self(x, t, image)
        gaussians, x0_mv = self.decode(x, t, out)
        return ThreeDOutput(gaussians, 2 * self.render(gaussians, self.cameras) - 1, x0_mv)

    def decode(self, x: torch.Tensor, t: torch.Tensor, out: MVOutput) -> tuple[Gaussians, torch.Tensor]:
        """The Gaussians of one forward pass `out` at (x, t) and the MV data prediction x0 = x + (1 - t) v
        (B, V, 3, S, S) they were decoded from (detached there)."""
        x0_mv = x + (1 - t)[:, None, None, None, None] * out.velocity
        return self.head(out.features, x0_mv.detach(), Rays(self.ray_origins, self.ray_dirs)), x0_mv

    def render(self, gaussians: Gaussians, cameras: Cameras) -> torch.Tensor:
        """B scenes through cameras (K,) -> (B, K, 3, S, S) images in [0, 1]."""
        return render_views(gaussians, cameras, size=self.config.rig.size)


class MVField(nn.Module):
    """The MV mode as a velocity field `field(x=, t=, image=)` (for the core's solvers and distillation losses)."""

    def __init__(self, model: DualModeModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, t: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """x (B, V, 3, S, S), t (B,), image (B, 3, S, S) -> velocity (B, V, 3, S, S)."""
        return self.model.velocity(x, t, image)
