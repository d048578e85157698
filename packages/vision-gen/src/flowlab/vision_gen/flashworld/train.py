"""Dual-mode pre-training through the kit's `fit_with_ema` (Adam, warm-up and cosine decay, EMA; checkpoint/resume
on the core `fit`), and the pre-trained model as the `vision.flashworld_dual_mode` artifact (built once, after the
scenes it trains on).

    model = pretrained_model(PretrainConfig())     # cached; EMA weights, eval mode
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.vision_gen.flashworld.model import DualModeConfig, DualModeModel
from flowlab.vision_gen.flashworld.objective import dual_mode_loss
from flowlab.vision_gen.flashworld.scenes import SceneConfig, novel_cameras, rig_cameras, scene_data
from flowlab.vision_gen.flashworld.store import load_model, save_model
from flowlab.vision_gen.kit.cameras import Cameras
from flowlab.vision_gen.kit.train import fit_with_ema

__all__ = [
    "PretrainConfig",
    "pretrain_dual_mode",
    "pretrained_artifact",
    "pretrained_model",
    "rig_and_novel",
]

#: seconds per pre-training step at batch 32 of the default model on 8x8 views, on one thread of the 2-core CPU
#: machine as every artifact builds (measured: 481 s for the quick build in a cold `flowlab bench`, another build
#: beside it)
_STEP_SECONDS = 0.48


@dataclass(frozen=True)
class PretrainConfig(Config):
    """`model` trained on the train split of `scenes` for `steps` steps of `batch_size` scenes at peak `lr`, with
    L_3D weighted by `weight_3d`, from `seed`, on a `device` type (the weights depend on it)."""

    model: DualModeConfig = field(default_factory=DualModeConfig)
    scenes: SceneConfig = field(default_factory=SceneConfig)
    steps: int = 2000
    batch_size: int = 32
    lr: float = 1e-3
    weight_3d: float = 1.0
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model.rig != self.scenes.rig:
            raise ValueError("model, scenes: expected the same camera rig")
        if min(self.steps, self.batch_size) < 1 or not self.lr > 0 or self.weight_3d < 0:
            raise ValueError(f"steps, batch_size, lr, weight_3d: expected positive (weight_3d >= 0), got "
                             f"{self.steps}, {self.batch_size}, {self.lr}, {self.weight_3d}")  # fmt: skip
        if self.device not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device: expected a device type (cpu, cuda or mps), got {self.device!r}")


def rig_and_novel(config: DualModeConfig, *, device: torch.device | str | None = None) -> Cameras:
    """The rig's cameras followed by the novel ones: (V + V_novel,)."""
    rig, novel = rig_cameras(config.rig, device=device), novel_cameras(config.rig, device=device)
    return Cameras(*(torch.cat((getattr(rig, a), getattr(novel, a))) for a in ("K", "R", "t")))


def pretrain_dual_mode(
    config: PretrainConfig,
    views: torch.Tensor,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> DualModeModel:
    """The dual-mode model trained on views (N, V + V_novel, 3, S, S) in [0, 1] (EMA weights, eval mode)."""
    rig = config.model.rig
    if views.dim() != 5 or tuple(views.shape[1:]) != (rig.views + rig.novel, 3, rig.size, rig.size):
        raise ValueError(f"views: expected (N, {rig.views + rig.novel}, 3, {rig.size}, {rig.size}), got "
                         f"{tuple(views.shape)}")  # fmt: skip
    torch.manual_seed(config.seed)
    model = DualModeModel(config.model)
    cameras = rig_and_novel(config.model, device=device)
    data = views.to(device)

    def batches(step: int, generator: torch.Generator) -> torch.Tensor:
        idx = torch.randint(len(data), (config.batch_size,), generator=generator, device=generator.device)
        return data[idx.to(data.device)]

    def loss_fn(net, batch, generator):
        return dual_mode_loss(net, batch, cameras, weight_3d=config.weight_3d, generator=generator)

    fit_with_ema(model, loss_fn, batches, steps=config.steps, lr=config.lr, ema_warmup=min(100, config.steps // 4),
                 schedule="warmup_cosine", device=device, progress=progress,
                 generator=torch.Generator().manual_seed(config.seed), ckpt_dir=ckpt_dir)  # fmt: skip
    return model.eval()


def _build(config: PretrainConfig, folder: Path) -> None:
    views = scene_data(config.scenes, "train").views
    model = pretrain_dual_mode(config, views, device=config.device, progress=True)
    save_model(folder, model, kind="pretrained", pretrain=config.to_dict())


def pretrained_artifact(config: PretrainConfig) -> Artifact:
    """The cache entry of the pre-trained dual-mode model of `config`."""
    cost = (config.batch_size / 32) * (config.model.dim / 96) ** 2 * config.model.depth / 4
    return Artifact("vision.flashworld_dual_mode", build=_build, config=config,
                    expected_seconds=max(1.0, config.steps * _STEP_SECONDS * cost),
                    description=f"dual-mode multi-view model, {config.steps} steps")  # fmt: skip


def pretrained_model(config: PretrainConfig, *, device: torch.device | str = "cpu") -> DualModeModel:
    """The pre-trained model of `config` on `device` (built into the cache on the first call)."""
    return load_model(ensure(pretrained_artifact(config)).path, device=device, name="artifact")[0]
