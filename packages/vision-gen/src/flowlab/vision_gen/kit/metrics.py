"""The digits CNN behind the quality kit: a seeded net, its 128-d features and the "digits-FD" (Frechet distance in
them); `kit.quality` builds its measures on them.

The net (conv 32 -> pool -> conv 64 -> pool -> 128 ReLU -> 10 logits at 16x16) is trained once with seed 0 on the
fixed train split (Adam 1e-3, 30 epochs, +-1 px shifts): a core artifact, built once into $FLOWLAB_CACHE and
checked on every load. Inputs are images in [-1, 1] of any size (resized to 16x16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.core.metrics.frechet import frechet_distance
from flowlab.core.train import fit
from flowlab.vision_gen.kit.data import digits_source, load_digits_images

__all__ = [
    "DigitsFeatureNet",
    "FeatureNetConfig",
    "digits_fd",
    "digits_feature_net",
    "digits_features",
    "feature_net_artifact",
]


@dataclass(frozen=True)
class FeatureNetConfig(Config):
    """The digits CNN's training: cross-entropy, Adam at `lr`, `epochs` over the train split in batches of `batch`,
    each batch rolled by up to `shift` px; `seed` for the init and the batches."""

    epochs: int = 30
    lr: float = 1e-3
    batch: int = 64
    seed: int = 0
    shift: int = 1


class DigitsFeatureNet(nn.Module):
    """The digits classifier whose penultimate layer (128 features) is the quality kit's feature space: two conv
    blocks at 16x16 and a linear head over 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 4 * 4, 128)
        self.head = nn.Linear(128, 10)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 1, H, W) in [-1, 1] -> (B, 128)."""
        if x.shape[-2:] != (16, 16):
            x = F.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False, antialias=True)
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return F.relu(self.fc(h.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, 1, 16, 16) -> class logits (B, 10)."""
        return self.head(self.features(x))


def _train(net: DigitsFeatureNet, config: FeatureNetConfig) -> None:
    """Cross-entropy on the train split through the core `fit`: a fresh permutation each epoch, batches of
    `config.batch` images rolled by one random (dy, dx) in {-shift, ..., shift}^2 each."""
    data = load_digits_images(16, split="train")
    n, size = len(data), config.batch
    per_epoch = math.ceil(n / size)
    order: list[torch.Tensor] = []

    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        if step % per_epoch == 0:
            order[:] = [torch.randperm(n, generator=g)]
        idx = order[0][(step % per_epoch) * size :][:size]
        dx, dy = (int(v) for v in torch.randint(-config.shift, config.shift + 1, (2,), generator=g))
        return torch.roll(data.x[idx], shifts=(dy, dx), dims=(2, 3)), data.y[idx]

    fit(
        net,
        lambda model, batch, g: (F.cross_entropy(model(batch[0]), batch[1]), {}),
        batches,
        steps=config.epochs * per_epoch,
        optimizer=torch.optim.Adam(net.parameters(), lr=config.lr),
        grad_clip=None,
        device="cpu",
        generator=torch.Generator().manual_seed(config.seed),
        progress=False,
        log_every=per_epoch,
    )


def _build_feature_net(config: FeatureNetConfig, folder: Path) -> None:
    torch.manual_seed(config.seed)
    net = DigitsFeatureNet()
    _train(net, config)
    torch.save(net.state_dict(), folder / "weights.pt")


def feature_net_artifact(config: FeatureNetConfig | None = None) -> Artifact:
    """The cache entry of the digits CNN (the default's 30 epochs train on 2 CPU cores in about 6 s)."""
    return Artifact(
        "vision.digits_feature_net",
        build=_build_feature_net,
        config=config or FeatureNetConfig(),
        inputs=(digits_source(),),
        expected_seconds=0.2 * (config or FeatureNetConfig()).epochs,
        threads=2,  # the two-thread bytes behind the watermark's published digits-FDs (its 14605fd table)
        description="digits CNN whose 128-d features give the digits-FD",
    )


_NET: dict[str, DigitsFeatureNet] = {}


def digits_feature_net(
    config: FeatureNetConfig | None = None, *, device: torch.device | str | None = None
) -> DigitsFeatureNet:
    """The trained, cached feature net of `config` (default: the kit's; eval mode, no grad)."""
    artifact = feature_net_artifact(config)
    key = artifact.key()
    if key not in _NET:
        with torch.random.fork_rng(devices=[]):  # the first call in a process leaves torch's global RNG as it was
            net = DigitsFeatureNet()
        net.load_state_dict(torch.load(ensure(artifact).path / "weights.pt", map_location="cpu", weights_only=True))
        net.eval().requires_grad_(False)
        _NET[key] = net
    return _NET[key].to(device or "cpu")


def digits_features(x: torch.Tensor, config: FeatureNetConfig | None = None) -> torch.Tensor:
    """The digits net's 128-d features of images x: (N, 1, H, W) in [-1, 1] -> (N, 128), in batches of 512."""
    net = digits_feature_net(config, device=x.device)
    with torch.no_grad():
        return torch.cat([net.features(x[i : i + 512].float()) for i in range(0, x.shape[0], 512)])


def digits_fd(
    samples: torch.Tensor, reference: torch.Tensor | str = "test", *, features: FeatureNetConfig | None = None
) -> float:
    """digits-FD between images (N, 1, H, W) in [-1, 1] and `reference` images or a digits split name, in the
    features of the `features` net (default: the kit's)."""
    if isinstance(reference, str):
        reference = load_digits_images(16, split=reference).x
    ours, theirs = digits_features(samples, features), digits_features(reference.to(samples.device), features)
    return float(frechet_distance(ours.double(), theirs.double()))
