"""Measuring a restored distribution against held-out clean images, and the generator every method's final data set
is judged through.

- `distribution_measures`: digits-FD (beside its real-vs-real floor at the same n), sliced W2 on pixels, the digits
  classifier's class-histogram TV to the reference's, and for a linear corruption that loses a null space the sliced
  W2 of the null-space parts (what no observation shows, so only the clean set can restore it).
- `fit_generator` / `generate`: an unconditional rectified-flow MLP trained on a data set (reconstructions, the
  corrupted observations or the clean few) and sampled with Heun steps, so every method's output is compared as the
  generator a user would get from it.
"""

from __future__ import annotations

import torch

from flowlab.core.grids import uniform
from flowlab.core.losses import flow_matching_loss
from flowlab.core.metrics.wasserstein import sliced_wasserstein
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import solve_ode
from flowlab.vision_gen.kit.corruptions import Corruption, LinearCorruption
from flowlab.vision_gen.kit.quality import class_histogram, fd_with_floor
from flowlab.vision_gen.kit.train import fit_with_ema
from flowlab.vision_gen.sfbd_omni.model import ImageMLP

__all__ = ["distribution_measures", "fit_generator", "generate"]


def _class_shares(reference: torch.Tensor) -> torch.Tensor:
    """The digits classifier's class shares (10,) of the reference, the target of the class TV."""
    shares = torch.tensor(class_histogram(reference.float()).histogram, dtype=torch.float64)
    return shares / shares.sum()


def _projections(d: int, n: int = 256) -> torch.Tensor:
    theta = torch.randn(d, n, generator=torch.Generator().manual_seed(12345), dtype=torch.float64)
    return theta / theta.norm(dim=0, keepdim=True)


def distribution_measures(
    x: torch.Tensor, reference: torch.Tensor, *, corruption: Corruption | None = None
) -> dict[str, float]:
    """x: (N, 1, H, W) restored images or samples, reference: (M, 1, H, W) held-out clean images, both in [-1, 1] ->
    fd, fd_floor, sliced_w, class_tv and (a linear, non-identifiable corruption) null_sw. Sliced W uses 256 fixed
    directions, so values are comparable across calls."""
    x, reference = x.detach().cpu().double(), reference.detach().cpu().double()
    fd = fd_with_floor(x.float(), reference.float())
    theta = _projections(x[0].numel())
    out = {
        "fd": fd.fd,
        "fd_floor": fd.floor,
        "sliced_w": float(sliced_wasserstein(x, reference, projections=theta)),
        "class_tv": class_histogram(x.float(), target=_class_shares(reference)).tv,
    }
    if isinstance(corruption, LinearCorruption) and not corruption.identifiable:
        null_x, null_ref = x - corruption.project(x), reference - corruption.project(reference)
        out["null_sw"] = float(sliced_wasserstein(null_x, null_ref, projections=theta))
    return out


def fit_generator(
    images: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 256,
    lr: float = 1e-3,
    hidden: tuple[int, ...] = (512, 512, 512),
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> ImageMLP:
    """A rectified-flow MLP trained on images (N, C, H, W) for `steps` steps (the kit's Adam/one-cycle/EMA recipe)."""
    if images.dim() != 4 or images.shape[0] < 2:
        raise ValueError(f"images: expected at least two images (N, C, H, W), got {tuple(images.shape)}")
    net = ImageMLP(tuple(images.shape[1:]), hidden=hidden, seed=seed)
    data, path = images.to(device), AffinePath(CondOT())

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        return data[torch.randint(0, data.shape[0], (batch_size,), generator=g).to(data.device)]

    def loss(model, x, g):
        noise = torch.randn(x.shape, generator=g).to(x)
        t = torch.rand(x.shape[0], generator=g).to(x)
        s = path.sample(noise, x, t)
        return flow_matching_loss(model(x=s.x_t, t=t), s), {}

    fit_with_ema(net, loss, batches, steps=steps, lr=lr, ema_decay=0.995, device=device,
                 generator=torch.Generator().manual_seed(seed))  # fmt: skip
    return net.eval().requires_grad_(False)


def generate(net: ImageMLP, n: int, *, steps: int = 20, seed: int = 0, device: torch.device | str = "cpu"):
    """n samples (n, C, H, W) of a `fit_generator` net: Heun from seeded Gaussian noise, clamped to [-1, 1]."""
    noise = torch.randn(n, *net.image_shape, generator=torch.Generator().manual_seed(seed)).to(device)
    with torch.no_grad():
        return solve_ode(net.to(device), noise, uniform(steps), method="heun").clamp(-1, 1)
