"""Pinhole cameras for multi-view rendering: intrinsics K, world-to-camera rotation R and translation t (OpenCV axes:
x right, y down, z forward; a world point p sits at R p + t in the camera), checked on construction; cameras on an
orbit looking at the origin; per-pixel rays and their Plücker coordinates.

    cams = orbit_cameras(torch.tensor([0.0, 90.0, 180.0, 270.0]), radius=2.5, elevation=20.0, focal=9.0, size=8)
    rays = pixel_rays(cams, 8)             # origins, dirs: (4, 64, 3); o + z d has camera depth z
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["Cameras", "Rays", "orbit_cameras", "pixel_rays", "plucker"]


def _check(x: object, name: str, tail: tuple[int, ...]) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor of shape (..., {', '.join(map(str, tail))})")
    if x.dim() < len(tail) or tuple(x.shape[x.dim() - len(tail) :]) != tail:
        raise ValueError(f"{name}: expected shape (..., {', '.join(map(str, tail))}), got {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name}: expected finite values, got NaN or infinity")
    return x


@dataclass(frozen=True)
class Cameras:
    """A batch of pinhole cameras: K (..., 3, 3) intrinsics in pixels (fx, fy > 0, pixel centres at +0.5),
    R (..., 3, 3) a rotation, t (..., 3); the batch shapes agree. Wrong shapes, non-finite values, a non-positive
    focal length or a non-orthonormal R raise a ValueError naming the matrix."""

    K: torch.Tensor
    R: torch.Tensor
    t: torch.Tensor

    def __post_init__(self) -> None:
        K, R, t = _check(self.K, "K", (3, 3)), _check(self.R, "R", (3, 3)), _check(self.t, "t", (3,))
        if not (K.shape[:-2] == R.shape[:-2] == t.shape[:-1]):
            raise ValueError(f"K, R, t: expected one batch shape, got {tuple(K.shape[:-2])}, {tuple(R.shape[:-2])}, "
                             f"{tuple(t.shape[:-1])}")  # fmt: skip
        if not bool((K[..., 0, 0] > 0).all() and (K[..., 1, 1] > 0).all()):
            raise ValueError("K: expected positive focal lengths K[0, 0] and K[1, 1]")
        eye = torch.eye(3, dtype=R.dtype, device=R.device)
        if not bool(((R @ R.transpose(-1, -2) - eye).abs() <= 1e-3).all()):
            raise ValueError("R: expected rotation matrices (R R^T = I)")

    @property
    def shape(self) -> torch.Size:
        """The batch shape (...)."""
        return self.t.shape[:-1]

    @property
    def centers(self) -> torch.Tensor:
        """(..., 3) camera centres in the world, -R^T t."""
        return -(self.R.transpose(-1, -2) @ self.t[..., None])[..., 0]

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> Cameras:
        """The same cameras on `device` / in `dtype`."""
        return Cameras(self.K.to(device, dtype), self.R.to(device, dtype), self.t.to(device, dtype))

    def reshape(self, *shape: int) -> Cameras:
        """The cameras with batch shape `shape`."""
        return Cameras(self.K.reshape(*shape, 3, 3), self.R.reshape(*shape, 3, 3), self.t.reshape(*shape, 3))

    def expand(self, *shape: int) -> Cameras:
        """The cameras broadcast to batch shape `shape` (leading dimensions added)."""
        return Cameras(self.K.expand(*shape, 3, 3), self.R.expand(*shape, 3, 3), self.t.expand(*shape, 3))

    def project(self, points: torch.Tensor) -> torch.Tensor:
        """points (..., N, 3) in the world -> (..., N, 2) pixel coordinates (u right, v down)."""
        cam = points @ self.R.transpose(-1, -2) + self.t[..., None, :]
        uv1 = (cam / cam[..., 2:]) @ self.K.transpose(-1, -2)
        return uv1[..., :2]


def orbit_cameras(
    azimuths: torch.Tensor,
    *,
    radius: float,
    elevation: float,
    focal: float,
    size: int,
    device: torch.device | str | None = None,
) -> Cameras:
    """Cameras at azimuths (V,) degrees on a circle of `radius` at `elevation` degrees (world z up), each looking at
    the origin, with focal length `focal` pixels and the principal point at the centre of a `size` x `size` image."""
    if not (radius > 0 and math.isfinite(radius)):
        raise ValueError(f"radius: expected a positive finite number, got {radius!r}")
    if not (focal > 0 and math.isfinite(focal)):
        raise ValueError(f"focal: expected a positive finite number, got {focal!r}")
    if not -89.0 <= elevation <= 89.0:
        raise ValueError(f"elevation: expected degrees in [-89, 89], got {elevation!r}")
    az = _check(azimuths[..., None], "azimuths", (1,))[..., 0].to(device, torch.get_default_dtype()).deg2rad()
    el = torch.tensor(elevation, device=az.device).deg2rad()
    center = radius * torch.stack((el.cos() * az.cos(), el.cos() * az.sin(), el.sin().expand_as(az)), -1)
    forward = -center / radius
    up = torch.tensor([0.0, 0.0, 1.0], device=az.device).expand_as(forward)
    right = torch.nn.functional.normalize(torch.linalg.cross(forward, up), dim=-1)
    down = torch.linalg.cross(forward, right)
    R = torch.stack((right, down, forward), dim=-2)
    t = -(R @ center[..., None])[..., 0]
    K = torch.tensor([[focal, 0.0, size / 2], [0.0, focal, size / 2], [0.0, 0.0, 1.0]], device=az.device)
    return Cameras(K.expand(*az.shape, 3, 3).clone(), R, t)


@dataclass(frozen=True)
class Rays:
    """Per-pixel rays: origins and dirs (..., H W, 3), row-major pixels; dirs are scaled so that o + z d lies at
    camera depth z (not unit length)."""

    origins: torch.Tensor
    dirs: torch.Tensor


def pixel_rays(cameras: Cameras, size: int) -> Rays:
    """The rays through the centres of the `size` x `size` pixels of every camera: (..., size^2, 3) each."""
    if not (isinstance(size, int) and size >= 1):
        raise ValueError(f"size: expected a positive int, got {size!r}")
    coords = torch.arange(size, device=cameras.t.device, dtype=cameras.t.dtype) + 0.5
    v, u = torch.meshgrid(coords, coords, indexing="ij")
    pix = torch.stack((u.reshape(-1), v.reshape(-1), torch.ones_like(u).reshape(-1)), -1)  # (P, 3)
    cam_dirs = pix @ torch.linalg.inv(cameras.K).transpose(-1, -2)  # (..., P, 3), z = 1
    dirs = cam_dirs @ cameras.R  # R^T applied to row vectors
    return Rays(cameras.centers[..., None, :].expand_as(dirs), dirs)


def plucker(rays: Rays) -> torch.Tensor:
    """Plücker coordinates (d, o x d) of the rays with unit d: (..., P, 6); the same for any origin on the ray."""
    d = torch.nn.functional.normalize(rays.dirs, dim=-1)
    return torch.cat((d, torch.linalg.cross(rays.origins, d, dim=-1)), dim=-1)
