"""A differentiable 3D Gaussian-splatting renderer in pure torch (Kerbl et al. 2023): EWA projection of each
Gaussian to a 2D Gaussian, then front-to-back alpha compositing sorted by camera depth, batched over scenes, every
Gaussian and every pixel at once (dense: meant for small images and few thousand Gaussians), on any device. With
`backend="gsplat"` (or "auto" on CUDA when the optional `gsplat` package is installed) the same call goes to
gsplat's CUDA rasteriser.

    out = render_gaussians(gaussians, cams, size=16)   # image (B, C, 16, 16), alpha and depth (B, 1, 16, 16)
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch

from flowlab.vision_gen.kit.cameras import Cameras

__all__ = ["BACKENDS", "Gaussians", "Render", "gsplat_available", "quaternion_matrix", "render_gaussians"]

#: the renderers: the pure-torch one, gsplat's CUDA rasteriser, or gsplat when it can run (CUDA, installed)
BACKENDS = ("torch", "gsplat", "auto")
#: the largest opacity of one Gaussian at one pixel (as in the reference rasteriser), so transmittance never hits 0
MAX_ALPHA = 0.99


@dataclass(frozen=True)
class Gaussians:
    """A batch of 3D Gaussians: means (B, N, 3), scales (B, N, 3) standard deviations along the rotated axes,
    quats (B, N, 4) unit quaternions (w, x, y, z) or None (axis-aligned), opacities (B, N) in [0, 1],
    colors (B, N, C)."""

    means: torch.Tensor
    scales: torch.Tensor
    opacities: torch.Tensor
    colors: torch.Tensor
    quats: torch.Tensor | None = None

    def __post_init__(self) -> None:
        for name in ("means", "scales", "opacities", "colors"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise ValueError(f"{name}: expected a tensor")
        b, n = self.means.shape[:2] if self.means.dim() == 3 else (None, None)
        shapes = {"means": (b, n, 3), "scales": (b, n, 3), "opacities": (b, n), "quats": (b, n, 4)}
        for name, shape in shapes.items():
            x = getattr(self, name)
            if x is not None and (b is None or tuple(x.shape) != shape):
                raise ValueError(f"{name}: expected shape {shape if b is not None else '(B, N, 3)'}, got "
                                 f"{tuple(x.shape)}")  # fmt: skip
        if self.colors.dim() != 3 or tuple(self.colors.shape[:2]) != (b, n):
            raise ValueError(f"colors: expected shape ({b}, {n}, C), got {tuple(self.colors.shape)}")

    def take(self, index: slice | torch.Tensor) -> Gaussians:
        """The scenes at `index` (a slice or indices along B)."""
        pick = lambda x: None if x is None else x[index]  # noqa: E731
        return Gaussians(pick(self.means), pick(self.scales), pick(self.opacities), pick(self.colors), pick(self.quats))

    def to(self, device: torch.device | str) -> Gaussians:
        """The same Gaussians on `device`."""
        move = lambda x: None if x is None else x.to(device)  # noqa: E731
        return Gaussians(move(self.means), move(self.scales), move(self.opacities), move(self.colors), move(self.quats))

    def repeat(self, k: int) -> Gaussians:
        """Each scene's Gaussians k times in a row: (B k, N, ...), e.g. one copy per view."""
        rep = lambda x: None if x is None else x.repeat_interleave(k, dim=0)  # noqa: E731
        return Gaussians(rep(self.means), rep(self.scales), rep(self.opacities), rep(self.colors), rep(self.quats))


@dataclass(frozen=True)
class Render:
    """image (B, C, H, W) composited over the background, alpha (B, 1, H, W) the accumulated opacity, depth
    (B, 1, H, W) the opacity-weighted camera depth."""

    image: torch.Tensor
    alpha: torch.Tensor
    depth: torch.Tensor


def gsplat_available() -> bool:
    """True when the optional `gsplat` package is installed and CUDA is available."""
    return torch.cuda.is_available() and importlib.util.find_spec("gsplat") is not None


def quaternion_matrix(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) of quaternions q (..., 4) = (w, x, y, z), normalised first."""
    w, x, y, z = torch.nn.functional.normalize(q, dim=-1).unbind(-1)
    rows = (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


def _projected(g: Gaussians, cams: Cameras, blur: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """EWA splatting: camera-space means (B, N, 3), pixel centres (B, N, 2) and 2D covariances (B, N, 2, 2)."""
    cam = g.means @ cams.R.transpose(-1, -2) + cams.t[:, None]
    x, y, z = cam.unbind(-1)
    z = z.clamp_min(1e-6)
    fx, fy = cams.K[:, 0, 0, None], cams.K[:, 1, 1, None]
    cx, cy = cams.K[:, 0, 2, None], cams.K[:, 1, 2, None]
    mu = torch.stack((fx * x / z + cx, fy * y / z + cy), -1)
    zero = torch.zeros_like(z)
    J = torch.stack((torch.stack((fx / z, zero, -fx * x / z**2), -1), torch.stack((zero, fy / z, -fy * y / z**2), -1)),
                    -2)  # fmt: skip
    rot = torch.eye(3, dtype=cam.dtype, device=cam.device) if g.quats is None else quaternion_matrix(g.quats)
    M = cams.R[:, None] @ rot * g.scales[..., None, :]  # R_cam R_q S: (B, N, 3, 3)
    JM = J @ M
    cov = JM @ JM.transpose(-1, -2) + blur * torch.eye(2, dtype=cam.dtype, device=cam.device)
    return cam, mu, cov


def render_gaussians(
    gaussians: Gaussians,
    cameras: Cameras,
    *,
    size: int,
    background: float = 0.0,
    blur: float = 0.3,
    near: float = 0.05,
    backend: str = "torch",
) -> Render:
    """Render B scenes of N Gaussians, scene b through camera b (cameras of batch shape (B,)), at size x size.

    Each Gaussian projects to a 2D Gaussian with covariance J R_cam Sigma R_cam^T J^T + blur I (J the perspective
    Jacobian at its mean; `blur` pixels^2 the anti-aliasing dilation) and opacity alpha = o exp(-d^T cov^-1 d / 2)
    (at most `MAX_ALPHA`) at each pixel centre; Gaussians nearer than `near` are dropped. Sorted by depth, they are
    composited front to back, C = sum_i c_i alpha_i prod_{j<i} (1 - alpha_j) + T background."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if not isinstance(cameras, Cameras) or tuple(cameras.shape) != tuple(gaussians.means.shape[:1]):
        got = tuple(cameras.shape) if isinstance(cameras, Cameras) else type(cameras).__name__
        raise ValueError(f"cameras: expected Cameras of batch shape ({gaussians.means.shape[0]},), got {got}")
    if not (isinstance(size, int) and size >= 1):
        raise ValueError(f"size: expected a positive int, got {size!r}")
    if not blur >= 0:
        raise ValueError(f"blur: expected a non-negative dilation, got {blur!r}")
    if backend == "gsplat" or (backend == "auto" and gsplat_available() and gaussians.means.is_cuda):
        return _render_gsplat(gaussians, cameras, size=size, background=background, blur=blur, near=near)
    cam, mu, cov = _projected(gaussians, cameras, blur)
    order = cam[..., 2].argsort(dim=1)  # front to back; sort the Gaussians, not the (B, N, P) opacities
    sort = lambda x: x.gather(1, order.reshape(*order.shape, *[1] * (x.dim() - 2)).expand_as(x))  # noqa: E731
    cam, mu, cov, opacities, colors = map(sort, (cam, mu, cov, gaussians.opacities, gaussians.colors))
    coords = torch.arange(size, device=cam.device, dtype=cam.dtype) + 0.5
    v, u = torch.meshgrid(coords, coords, indexing="ij")
    dx = u.reshape(-1) - mu[..., 0, None]  # (B, N, P)
    dy = v.reshape(-1) - mu[..., 1, None]
    a, b, c = cov[..., 0, 0, None], cov[..., 0, 1, None], cov[..., 1, 1, None]
    det = (a * c - b * b).clamp_min(1e-12)
    maha = (c * dx * dx - 2 * b * dx * dy + a * dy * dy) / det
    visible = (cam[..., 2] > near)[..., None]
    alpha = torch.where(visible, opacities[..., None] * torch.exp(-0.5 * maha), 0.0).clamp(max=MAX_ALPHA)
    trans = torch.cumprod(1 - alpha, dim=1)  # (B, N, P): transmittance after each Gaussian
    weights = alpha * torch.cat((torch.ones_like(trans[:, :1]), trans[:, :-1]), dim=1)
    left = trans[:, -1]  # (B, P)
    image = torch.einsum("bnp,bnc->bcp", weights, colors) + background * left[:, None]
    out = (image, (1 - left)[:, None], torch.einsum("bnp,bn->bp", weights, cam[..., 2])[:, None])
    return Render(*(x.reshape(*x.shape[:2], size, size) for x in out))


def _render_gsplat(
    gaussians: Gaussians, cameras: Cameras, *, size: int, background: float, blur: float, near: float
) -> Render:
    """The same render through `gsplat.rasterization` (CUDA; one camera per scene, batch dimensions)."""
    if not gsplat_available():
        raise ValueError("backend: 'gsplat' needs the gsplat package and CUDA")
    from gsplat import rasterization

    b, n, _ = gaussians.means.shape
    viewmats = torch.eye(4, dtype=cameras.R.dtype, device=cameras.R.device).repeat(b, 1, 1)
    viewmats[:, :3, :3], viewmats[:, :3, 3] = cameras.R, cameras.t
    quats = gaussians.quats
    if quats is None:
        quats = torch.tensor([1.0, 0.0, 0.0, 0.0], device=gaussians.means.device).expand(b, n, 4)
    channels = gaussians.colors.shape[-1]
    colors, alphas, _ = rasterization(
        gaussians.means, quats, gaussians.scales, gaussians.opacities, gaussians.colors, viewmats[:, None],
        cameras.K[:, None], size, size, near_plane=near, eps2d=blur, render_mode="RGB+ED",
    )  # fmt: skip
    colors, alphas = colors[:, 0].permute(0, 3, 1, 2), alphas[:, 0].permute(0, 3, 1, 2)
    image = colors[:, :channels] + background * (1 - alphas)
    return Render(image, alphas, colors[:, channels:] * alphas)  # gsplat's expected depth is divided by alpha
