"""Training a variant on class-labelled images through the kit's recipe on the core `fit` (Adam one-cycle, EMA,
checkpoint/resume, progress, DDP under torchrun):

    model = train_promoe(ModelConfig(variant="promoe"), TrainConfig(steps=3000), images, labels, device="cpu")

Objectives, in core time (t = 0 noise, t = 1 data): "rf", rectified flow x_t = (1 - t) eps + t x with target
x - eps at logit-normal t (the official code's t = 1 noise, converted); "ddpm", the epsilon loss on the linear
1000-step DDPM schedule. The regression is a mean over pixels (the official `mean_flat`), and the MoE layers'
auxiliary losses (RCL, load balancing), already weighted, are added to it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from flowlab.core.distributions import sample_times
from flowlab.core.losses import ddpm_loss, flow_matching_loss
from flowlab.core.nets.dit import DiT, DiTOutput
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT, DiscreteVP
from flowlab.core.train import TrainSettings
from flowlab.vision_gen.kit.train import fit_with_ema
from flowlab.vision_gen.promoe.kmeans import fit_kmeans_prototypes
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit
from flowlab.vision_gen.promoe.names import OBJECTIVES

__all__ = ["KMEANS_IMAGES", "TrainConfig", "promoe_loss", "train_promoe"]

#: how many training images (drawn by the run's seed) give the k-means-routing ablation its centroids
KMEANS_IMAGES = 512


@dataclass(frozen=True)
class TrainConfig(TrainSettings):
    """`steps` Adam steps of `batch_size` images (one-cycle to `lr`, EMA `ema_decay`) on `objective`; `seed` draws
    the weights, batches, times, noise and label dropout."""

    steps: int = 3000
    batch_size: int = 128
    objective: str = "rf"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective: expected one of {OBJECTIVES}, got {self.objective!r}")


class _Captured(torch.nn.Module):
    """net(..., return_aux=True) called as a plain field (for `ddpm_loss`), its last `DiTOutput` kept."""

    def __init__(self, net: torch.nn.Module, generator: torch.Generator) -> None:
        super().__init__()
        self.net, self.generator, self.output = net, generator, None

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        self.output = self.net(x=x, t=t.to(x.dtype), y=y, generator=self.generator, return_aux=True)
        return self.output.sample


def promoe_loss(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, objective: str, generator: torch.Generator
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The training loss of a labelled DiT on images x: (B, 1, S, S) with labels y: (B,): the objective's mean
    per-pixel regression plus the blocks' auxiliary losses; and the logs {"regression", "aux"}. `generator` draws
    the times, the noise and the label dropout."""
    if objective == "ddpm":
        captured = _Captured(model, generator)
        regression = ddpm_loss(captured, x, DiscreteVP.linear(), generator=generator, y=y)
        out: DiTOutput = captured.output
    else:
        noise = torch.randn(x.shape, generator=generator).to(x)
        t = sample_times(x.shape[0], dist="logit_normal", generator=generator).to(x)
        path = AffinePath(CondOT()).sample(noise, x, t)
        out = model(x=path.x_t, t=t, y=y, generator=generator, return_aux=True)
        regression = flow_matching_loss(out.sample, path) / x[0].numel()
    aux = out.aux_loss
    return regression + aux, {"regression": regression.detach(), "aux": aux.detach()}


def train_promoe(
    model_config: ModelConfig,
    config: TrainConfig,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    device: torch.device | str,
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> DiT:
    """The variant of `model_config` trained on images (N, 1, S, S) in [-1, 1] with labels (N,) in
    [0, num_classes): its EMA weights, in eval mode, on `device`. With `ckpt_dir` it checkpoints there and resumes
    from the latest checkpoint. The k-means-routing ablation first fits its frozen prototypes on `KMEANS_IMAGES`
    training images."""
    size = model_config.size
    if not isinstance(images, torch.Tensor) or images.dim() != 4 or tuple(images.shape[1:]) != (1, size, size):
        got = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"images: expected (N, 1, {size}, {size}), got {got}")
    if not bool(torch.isfinite(images).all()):
        raise ValueError("images: expected finite values, got NaN or inf")
    if not isinstance(labels, torch.Tensor) or labels.dtype != torch.long or tuple(labels.shape) != images.shape[:1]:
        raise ValueError(f"labels: expected int64 labels of shape ({images.shape[0]},)")
    if labels.numel() and not (int(labels.min()) >= 0 and int(labels.max()) < model_config.num_classes):
        raise ValueError(f"labels: expected values in [0, {model_config.num_classes})")
    device = torch.device(device)
    model = promoe_dit(model_config, seed=config.seed).to(device)
    data, targets = images.to(device), labels.to(device)
    if model_config.variant == "promoe_kmeans":
        pick = torch.randperm(data.shape[0], generator=torch.Generator().manual_seed(config.seed))[:KMEANS_IMAGES]
        pick = pick.to(device)
        fit_kmeans_prototypes(model, data[pick], targets[pick], objective=config.objective, seed=config.seed)

    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(0, data.shape[0], (config.batch_size,), generator=g).to(device)
        return data[idx], targets[idx]

    def loss(net, batch, g):
        return promoe_loss(net, *batch, objective=config.objective, generator=g)

    fit_with_ema(model, loss, batches, steps=config.steps, lr=config.lr, ema_decay=config.ema_decay, device=device,
                 generator=torch.Generator().manual_seed(config.seed), progress=progress,
                 ckpt_dir=ckpt_dir)  # fmt: skip
    return model.eval()
