"""The training objectives of each stage, as modules (so `fit` and DDP see one forward): batch -> (loss, logs).

A batch is {"x_up": (B, 3, S, S), "hr": (B, 3, S, S), "c": (B,) conditions}. Targets under the negative condition:
the encoded x_up for the teacher, the teacher's own output under it for the students. Adversarial terms use the
core's `gan_losses`, so one optimizer over student and discriminator head trains both.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.losses import gan_losses
from flowlab.vision_gen.gendr_pix.model import (
    NEGATIVE,
    FeatureDiscriminator,
    GenDRConfig,
    LatentTeacher,
    PixelSR,
    StageOne,
)
from flowlab.vision_gen.gendr_pix.pixel_ops import rand_pad
from flowlab.vision_gen.kit.fourier import masked_fourier_loss

__all__ = ["NaiveObjective", "StageOneObjective", "StageTwoObjective", "TeacherObjective"]

Logs = dict[str, torch.Tensor]


def _negative(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return (batch["c"] == NEGATIVE)[:, None, None, None]


class TeacherObjective(nn.Module):
    """The latent teacher: L1 to the encoded target in latent space plus L1 to the target pixels through the frozen
    decoder (target: hr, or x_up under the negative condition)."""

    def __init__(self, teacher: LatentTeacher) -> None:
        super().__init__()
        self.teacher = teacher

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> tuple[torch.Tensor, Logs]:
        """`(latent L1 + pixel L1, logs)` of the teacher on `batch` (`x_up`, `hr`, `c`)."""
        target = torch.where(_negative(batch), batch["x_up"], batch["hr"])
        with torch.no_grad():
            z_target = self.teacher.encode(target)
        z = self.teacher.latent(batch["x_up"], batch["c"])
        latent, pixel = F.l1_loss(z, z_target), F.l1_loss(self.teacher.decode(z), target)
        return latent + pixel, {"latent_l1": latent.detach(), "pixel_l1": pixel.detach()}


class StageOneObjective(nn.Module):
    """Stage I: ||z_tea - z_stu||_1 + gan_weight softplus(-D1(z_stu)), D1 the frozen teacher net's features with a
    trainable head (trained on teacher latents as real)."""

    def __init__(self, student: StageOne, teacher: LatentTeacher, config: GenDRConfig) -> None:
        super().__init__()
        self.student, self.teacher = student, teacher.eval().requires_grad_(False)
        self.discriminator = FeatureDiscriminator(teacher.net)
        self.gan_weight = config.gan_weight

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> tuple[torch.Tensor, Logs]:
        """`(L1 to the teacher latents + gan_weight G loss + D loss, logs)` of the student on `batch`."""
        with torch.no_grad():
            z_teacher = self.teacher.latent(batch["x_up"], batch["c"])
        z = self.student.latent(batch["x_up"], batch["c"])
        l1 = F.l1_loss(z, z_teacher)
        g_loss, d_loss = gan_losses(self.discriminator, z_teacher, z)
        logs = {"l1": l1.detach(), "g": g_loss.detach(), "d": d_loss.detach()}
        return l1 + self.gan_weight * g_loss + d_loss, logs


class StageTwoObjective(nn.Module):
    """Stage II: ||y_tea - y_stu||_1 + gan_weight softplus(-D2(randpad(y_stu))) + perceptual_weight L_P +
    fourier_weight L_F, D2 the frozen stage-I net's features of the pixel-unshuffled image with a trainable head.
    L_P: L1 between the autoencoder encoder's latents; L_F: the masked Fourier loss at the shuffle period.
    `config.rand_pad` / `config.fourier` switch RandPad and L_F off for the ablations."""

    def __init__(self, student: PixelSR, stage_one: StageOne, teacher: LatentTeacher, config: GenDRConfig) -> None:
        super().__init__()
        self.student, self.teacher = student, teacher.eval().requires_grad_(False)
        self.discriminator = FeatureDiscriminator(stage_one.net, unshuffle=config.factor)
        self.config = config

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> tuple[torch.Tensor, Logs]:
        """`(loss, logs)`: L1 to the teacher's image plus the GAN, perceptual and (with `fourier`) masked Fourier terms
        and the D loss."""
        cfg, r = self.config, self.config.factor
        with torch.no_grad():
            y_teacher = self.teacher(batch["x_up"], batch["c"])
            z_teacher = self.teacher.encode(y_teacher)
        y = self.student(batch["x_up"], batch["c"])
        l1 = F.l1_loss(y, y_teacher)
        real, fake = y_teacher, y
        if cfg.rand_pad:
            real, fake = rand_pad(real, r, generator=generator)[0], rand_pad(fake, r, generator=generator)[0]
        g_loss, d_loss = gan_losses(self.discriminator, real, fake)
        perceptual = F.l1_loss(self.teacher.encode(y), z_teacher)
        loss = l1 + cfg.gan_weight * g_loss + d_loss + cfg.perceptual_weight * perceptual
        logs = {"l1": l1.detach(), "g": g_loss.detach(), "d": d_loss.detach(), "perceptual": perceptual.detach()}
        if cfg.fourier:
            fourier = masked_fourier_loss(y, y_teacher, period=r, radius=cfg.fourier_radius)
            loss = loss + cfg.fourier_weight * fourier
            logs["fourier"] = fourier.detach()
        return loss, logs


class NaiveObjective(nn.Module):
    """L1 only, to the teacher's output (`teacher` given: the naive VAE removal) or to the ground truth (None: the
    ESPCN-like floor; x_up under the negative condition)."""

    def __init__(self, student: PixelSR, teacher: LatentTeacher | None) -> None:
        super().__init__()
        self.student = student
        self.teacher = None if teacher is None else teacher.eval().requires_grad_(False)

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator) -> tuple[torch.Tensor, Logs]:
        """`(L1 of the student's output to its target, logs)` on `batch`."""
        if self.teacher is None:
            target = torch.where(_negative(batch), batch["x_up"], batch["hr"])
        else:
            with torch.no_grad():
                target = self.teacher(batch["x_up"], batch["c"])
        l1 = F.l1_loss(self.student(batch["x_up"], batch["c"]), target)
        return l1, {"l1": l1.detach()}
