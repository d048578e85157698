"""Training of the teacher, the two distillation stages and the baselines, each on the core `fit` (Adam, grad clip,
checkpoint/resume, progress, DDP under torchrun), on LQ-HQ pairs drawn from a fixed pool.

    teacher = train_teacher(tiny_autoencoder(config.autoencoder), pairs, config, device="cpu")
    stage_one = distill_stage1(teacher, pairs, config, device="cpu")
    student = distill_stage2(stage_one, teacher, pairs, config, device="cpu")
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from flowlab.core.train import fit
from flowlab.vision_gen.gendr_pix.data import SRPairs
from flowlab.vision_gen.gendr_pix.model import NEGATIVE, POSITIVE, GenDRConfig, LatentTeacher, PixelSR, SRNet, StageOne
from flowlab.vision_gen.gendr_pix.objective import (
    NaiveObjective,
    StageOneObjective,
    StageTwoObjective,
    TeacherObjective,
)
from flowlab.vision_gen.kit.autoencoder import TinyAutoencoder

__all__ = ["distill_stage1", "distill_stage2", "train_espcn", "train_naive", "train_teacher"]

#: seed offsets of the stages, so that each draws its own batches
_OFFSETS = {"teacher": 0, "stage1": 1, "stage2": 2, "naive": 3, "espcn": 4}


def _check_pairs(pairs: object, config: GenDRConfig) -> SRPairs:
    if not isinstance(pairs, SRPairs):
        raise ValueError(f"pairs: expected SRPairs, got {type(pairs).__name__}")
    if pairs.hr.shape[-1] % config.factor or pairs.hr.shape[-2] % config.factor:
        raise ValueError(f"pairs: expected HR sides multiple of the shuffle factor {config.factor}, "
                         f"got {tuple(pairs.hr.shape[-2:])}")  # fmt: skip
    return pairs


def _train(
    objective: nn.Module,
    pairs: SRPairs,
    config: GenDRConfig,
    stage: str,
    steps: int,
    *,
    device: torch.device | str,
    progress: bool,
    ckpt_dir: str | os.PathLike[str] | None,
) -> None:
    """Adam at config.lr on the objective's trainable parameters, batches of config.batch_size drawn from `pairs`
    with a share config.negative_share of negative conditions; seeded by config.seed and the stage."""
    device = torch.device(device)
    x_up, hr = pairs.x_up.to(device), pairs.hr.to(device)

    def batches(step: int, g: torch.Generator) -> dict[str, torch.Tensor]:
        idx = torch.randint(0, len(pairs), (config.batch_size,), generator=g)
        negative = torch.rand(config.batch_size, generator=g) < config.negative_share
        c = torch.where(negative, NEGATIVE, POSITIVE).to(device)
        return {"x_up": x_up[idx.to(device)], "hr": hr[idx.to(device)], "c": c}

    opt = torch.optim.Adam([p for p in objective.parameters() if p.requires_grad], lr=config.lr)
    fit(objective, lambda model, batch, g: model(batch, g), batches, steps=steps, optimizer=opt, device=device,
        generator=torch.Generator().manual_seed(config.seed * 10 + _OFFSETS[stage]), progress=progress,
        log_every=max(1, steps // 10), ckpt_dir=ckpt_dir, ckpt_every=max(1, steps // 4),
        config={"gendr_pix": config.to_dict(), "stage": stage})  # fmt: skip
    objective.zero_grad(set_to_none=True)
    objective.eval().requires_grad_(False)


@contextmanager
def _seeded(config: GenDRConfig, stage: str) -> Iterator[None]:
    """Draw the stage's new weights (fresh convs, the discriminator head) from its own seed, whatever ran before."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed * 10 + _OFFSETS[stage])
        yield


def train_teacher(
    autoencoder: TinyAutoencoder,
    pairs: SRPairs,
    config: GenDRConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> LatentTeacher:
    """The latent teacher on the frozen `autoencoder` (its downsampling = the shuffle factor), trained
    config.teacher_steps steps; returned in eval mode without gradients."""
    pairs = _check_pairs(pairs, config)
    if autoencoder.settings.downsample != config.factor or autoencoder.settings.in_channels != 3:
        raise ValueError(f"autoencoder: expected an RGB autoencoder downsampling by {config.factor}, got "
                         f"{autoencoder.settings!r}")  # fmt: skip
    latent = autoencoder.settings.latent_channels
    with _seeded(config, "teacher"):
        teacher = LatentTeacher(autoencoder, SRNet(latent, latent, config.width, config.blocks, zero_out=True))
    _train(TeacherObjective(teacher.to(device)), pairs, config, "teacher", config.teacher_steps, device=device,
           progress=progress, ckpt_dir=ckpt_dir)  # fmt: skip
    return teacher


def distill_stage1(
    teacher: LatentTeacher,
    pairs: SRPairs,
    config: GenDRConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> StageOne:
    """Stage I: the encoder replaced by pixel-unshuffle; the teacher's net with a fresh conv in (3 r^2 channels) and
    a zero-initialised conv out (it predicts the latent itself, not the teacher's correction to E(x_up)), distilled
    by latent L1 + GAN against the teacher-feature discriminator for config.stage1_steps steps."""
    pairs = _check_pairs(pairs, config)
    r, latent = config.factor, teacher.autoencoder.settings.latent_channels
    with _seeded(config, "stage1"):
        student = StageOne(teacher, teacher.net.with_ends(3 * r * r, latent, zero_out=True)).to(device)
        objective = StageOneObjective(student, teacher, config).to(device)
    _train(objective, pairs, config, "stage1", config.stage1_steps, device=device,
           progress=progress, ckpt_dir=ckpt_dir)  # fmt: skip
    return student


def distill_stage2(
    stage_one: StageOne,
    teacher: LatentTeacher,
    pairs: SRPairs,
    config: GenDRConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
    ckpt_dir: str | os.PathLike[str] | None = None,
) -> PixelSR:
    """Stage II: the decoder replaced by pixel-shuffle; the stage-I net with a zero-initialised conv out (3 r^2
    channels, a residual on x_up), distilled by the full stage-II loss against the stage-I-feature discriminator for
    config.stage2_steps steps."""
    pairs = _check_pairs(pairs, config)
    r = config.factor
    with _seeded(config, "stage2"):
        student = PixelSR(stage_one.net.with_ends(3 * r * r, 3 * r * r, zero_out=True), r).to(device)
        objective = StageTwoObjective(student, stage_one, teacher, config).to(device)
    _train(objective, pairs, config, "stage2", config.stage2_steps,
           device=device, progress=progress, ckpt_dir=ckpt_dir)  # fmt: skip
    return student


def train_naive(
    teacher: LatentTeacher,
    pairs: SRPairs,
    config: GenDRConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> PixelSR:
    """The naive VAE removal: the teacher's net with pixel-(un)shuffle ends, L1 to the teacher's output only (no
    GAN, RandPad or Fourier loss), in one stage of stage1 + stage2 steps."""
    pairs = _check_pairs(pairs, config)
    r = config.factor
    with _seeded(config, "naive"):
        student = PixelSR(teacher.net.with_ends(3 * r * r, 3 * r * r, zero_out=True), r).to(device)
    _train(NaiveObjective(student, teacher), pairs, config, "naive", config.stage1_steps + config.stage2_steps,
           device=device, progress=progress, ckpt_dir=None)  # fmt: skip
    return student


def train_espcn(
    pairs: SRPairs, config: GenDRConfig, *, device: torch.device | str = "cpu", progress: bool = False
) -> PixelSR:
    """The ESPCN-like floor: the same pixel net from scratch, L1 to the ground truth, stage1 + stage2 steps."""
    pairs = _check_pairs(pairs, config)
    r = config.factor
    with _seeded(config, "espcn"):
        student = PixelSR(SRNet(3 * r * r, 3 * r * r, config.width, config.blocks, zero_out=True), r).to(device)
    _train(NaiveObjective(student, None), pairs, config, "espcn", config.stage1_steps + config.stage2_steps,
           device=device, progress=progress, ckpt_dir=None)  # fmt: skip
    return student
