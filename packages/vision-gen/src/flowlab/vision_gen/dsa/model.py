"""The tiny video DiT whose attention DSA profiles: a core `VideoDiT` trained by rectified flow on the kit's moving
digits (8 frames of 16 x 16, patch 2: 8 frames x 8 x 8 tokens), attention functions that record each block's heads
or apply a per-head mask, and Euler sampling with a chosen attention in every block."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from flowlab.core.config import Config
from flowlab.core.distributions import sample_times
from flowlab.core.losses import flow_matching_loss
from flowlab.core.nets import AttentionFn, TokenLayout, VideoDiT, seeded_init
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import solve_ode
from flowlab.vision_gen.kit.train import fit_with_ema
from flowlab.vision_gen.kit.video import moving_digits

__all__ = [
    "MaskedAttention",
    "RecordingAttention",
    "VideoModelConfig",
    "sample_video",
    "set_attention",
    "train_video_dit",
]


@dataclass(frozen=True)
class VideoModelConfig(Config):
    """A `VideoDiT` of `depth` blocks of width `dim` with `heads` heads on clips of `frames` frames of `size` x
    `size` (patch `patch`), trained `steps` Adam steps of `batch_size` clips (one-cycle to `lr`) drawn from `clips`
    moving-digit clips; `seed` draws the weights, clips, times and noise."""

    frames: int = 8
    size: int = 16
    patch: int = 2
    dim: int = 32
    depth: int = 2
    heads: int = 4
    steps: int = 300
    batch_size: int = 16
    lr: float = 2e-3
    clips: int = 512
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("frames", "size", "patch", "dim", "depth", "heads", "steps", "batch_size", "clips"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if self.size % self.patch or self.size < 8:
            raise ValueError(f"size: expected a multiple of patch {self.patch} and >= 8, got {self.size}")
        if self.dim % self.heads:
            raise ValueError(f"dim: expected a multiple of heads {self.heads}, got {self.dim}")
        if not 0 < self.lr < math.inf:
            raise ValueError(f"lr: expected a positive finite learning rate, got {self.lr}")

    @property
    def layout(self) -> TokenLayout:
        """frames x (size / patch)^2 tokens."""
        grid = self.size // self.patch
        return TokenLayout(self.frames, grid, grid)


class RecordingAttention:
    """Dense attention that keeps the (q, k, v), each (B, H, N, D), of its calls in `calls`."""

    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def __call__(self, q, k, v, *, mask=None, layout=None) -> torch.Tensor:
        """q, k, v: (B, H, N, D) -> (B, H, N, D), recorded."""
        self.calls.append((q.detach(), k.detach(), v.detach()))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class MaskedAttention:
    """Attention under a fixed per-head bool mask `masks`: (H, N, N), True = attend (a block's sparse attention)."""

    def __init__(self, masks: torch.Tensor) -> None:
        self.masks = masks

    def __call__(self, q, k, v, *, mask=None, layout=None) -> torch.Tensor:
        """q, k, v: (B, H, N, D) -> (B, H, N, D)."""
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.masks.to(q.device))


def set_attention(model: VideoDiT, attention: Sequence[AttentionFn]) -> None:
    """Give block i of `model` the attention function `attention[i]`."""
    if len(attention) != len(model.blocks):
        raise ValueError(f"attention: expected one function per block ({len(model.blocks)}), got {len(attention)}")
    for block, fn in zip(model.blocks, attention, strict=True):
        block.attention = fn


def _rf_loss(model, x: torch.Tensor, generator: torch.Generator):
    """Rectified flow on clips x: (B, F, 1, S, S): x_t = (1 - t) eps + t x, velocity target x - eps."""
    noise = torch.randn(x.shape, generator=generator).to(x)
    t = sample_times(x.shape[0], dist="logit_normal", generator=generator).to(x)
    path = AffinePath(CondOT()).sample(noise, x, t)
    loss = flow_matching_loss(model(x=path.x_t, t=t), path) / x[0].numel()
    return loss, {}


def train_video_dit(cfg: VideoModelConfig, *, device: torch.device | str, progress: bool = False) -> VideoDiT:
    """A `VideoDiT` trained on moving digits per `cfg`: its EMA weights, in eval mode, on `device`."""
    device = torch.device(device)
    gen = torch.Generator().manual_seed(cfg.seed)
    data = moving_digits(cfg.clips, frames=cfg.frames, size=cfg.size, generator=gen).x.to(device)
    with seeded_init(cfg.seed):
        model = VideoDiT(cfg.frames, cfg.size, cfg.patch, 1, cfg.dim, cfg.depth, cfg.heads).to(device)

    def batches(step: int, g: torch.Generator) -> torch.Tensor:
        return data[torch.randint(0, data.shape[0], (cfg.batch_size,), generator=g).to(device)]

    fit_with_ema(model, _rf_loss, batches, steps=cfg.steps, lr=cfg.lr, device=device, generator=gen,
                 progress=progress)  # fmt: skip
    return model.eval()


@torch.inference_mode()
def sample_video(model: VideoDiT, noise: torch.Tensor, *, steps: int) -> torch.Tensor:
    """Euler sampling of clips from `noise` (B, F, 1, S, S) in `steps` steps with the blocks' current attention."""
    grid = torch.linspace(0.0, 1.0, steps + 1, device=noise.device)
    return solve_ode(model, noise, grid, method="euler")
