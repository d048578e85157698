"""Few-step sampling and quality of a consistency student, the teacher's reference row, and the paper's gradient-bias
measurement at initialisation (Thm 5.1): the consistency-training gradient against the oracle one whose pair lies on
the teacher's ODE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.losses import ecm_loss
from flowlab.core.solvers import consistency_sample
from flowlab.vision_gen.cmt.model import PostConfig
from flowlab.vision_gen.kit.metrics import FeatureNetConfig
from flowlab.vision_gen.kit.quality import class_histogram, fd_with_floor

__all__ = ["GradientBias", "Quality", "few_step_quality", "few_step_samples", "gradient_bias", "quality"]

#: the intermediate level of two-step sampling (the official code's default)
SIGMA_MID = 0.821


@dataclass(frozen=True)
class Quality:
    """digits-FD against the test split beside its real-vs-real floor at the same n, classifier accuracy on the
    labels."""

    fd: float
    floor: float
    accuracy: float


@dataclass(frozen=True)
class GradientBias:
    """At one initialisation, over `batches` batches: bias = mean |g_oracle - g_ct|^2, relative = bias / mean
    |g_oracle|^2, cosine = mean cos(g_oracle, g_ct); gradients over all parameters."""

    bias: float
    relative: float
    cosine: float


def few_step_samples(
    student: Any,
    labels: torch.Tensor,
    *,
    steps: int,
    noise: torch.Tensor,
    generator: torch.Generator | None = None,
    sigma_max: float = 80.0,
    sigma_mid: float = SIGMA_MID,
) -> torch.Tensor:
    """Class-conditional samples (B, 1, S, S) of a consistency student in `steps` (1 or 2) network calls from noise:
    (B, 1, S, S); the student is put in eval mode (f(x; sigma_min) = x) and restored to its mode after."""
    if steps not in (1, 2):
        raise ValueError(f"steps: expected 1 or 2, got {steps!r}")
    levels = [sigma_max] if steps == 1 else [sigma_max, sigma_mid]
    was_training = student.training
    student.eval()
    try:
        with torch.inference_mode():
            sigmas = torch.tensor(levels, device=noise.device, dtype=noise.dtype)
            return consistency_sample(student, noise, sigmas, sigma_min=student.sigma_min, generator=generator,
                                      y=labels).clamp(-1, 1)  # fmt: skip
    finally:
        student.train(was_training)


def quality(samples: torch.Tensor, labels: torch.Tensor, *, seed: int = 0, repeats: int = 3,
            features: FeatureNetConfig | None = None) -> Quality:  # fmt: skip
    """The kit's digits-FD (with its floor at the same n) and class accuracy of samples (N, 1, S, S)."""
    fd = fd_with_floor(samples, repeats=repeats, seed=seed, features=features)
    return Quality(fd.fd, fd.floor, class_histogram(samples, labels, features=features).accuracy)


def few_step_quality(
    student: Any,
    labels: torch.Tensor,
    noise: torch.Tensor,
    *,
    seed: int = 0,
    repeats: int = 3,
    features: FeatureNetConfig | None = None,
) -> dict[str, float]:
    """`quality` of the student's 1- and 2-step samples from noise: (N, 1, S, S) for labels (N,), the 2-step
    re-noising drawn from `seed`: {"fd_1step", "acc_1step", "fd_2step", "acc_2step", "fd_floor"}."""
    out: dict[str, float] = {}
    for k in (1, 2):
        x = few_step_samples(student, labels, steps=k, noise=noise, generator=torch.Generator().manual_seed(seed))
        q = quality(x.cpu(), labels.cpu(), seed=seed, repeats=repeats, features=features)
        out |= {f"fd_{k}step": q.fd, f"acc_{k}step": q.accuracy, "fd_floor": q.floor}
    return out


def _grad(student: torch.nn.Module, loss: torch.Tensor) -> torch.Tensor:
    params = [p for p in student.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])


def gradient_bias(
    student: torch.nn.Module,
    teacher: Any,
    images: torch.Tensor,
    labels: torch.Tensor,
    config: PostConfig,
    *,
    batch_size: int = 256,
    batches: int = 4,
    seed: int = 0,
) -> GradientBias:
    """Thm 5.1's gradient bias of `student` at its current weights: per batch of real digits, the ECM loss of
    `config` with x_r = y + r e (consistency training, what post-training follows) and with x_r the EDM
    `teacher`'s Heun step from the same x_t (the oracle pair on the ODE), both from the same (t, r, e) draws."""
    q, stage = config.pairing(0)
    kw = {"q": q, "stage": stage, "k": config.k, "b": config.b, "p_mean": config.p_mean, "p_std": config.p_std,
          "c": config.c}  # fmt: skip
    g = torch.Generator().manual_seed(seed)
    device = images.device
    bias, norm, cos = 0.0, 0.0, 0.0
    for i in range(batches):
        idx = torch.randint(0, images.shape[0], (batch_size,), generator=g).to(device)
        x_1, cond = images[idx], {"y": labels[idx]}
        draws = seed * 1000 + i  # the same (t, r, e) in both losses
        oracle = ecm_loss(student, x_1, teacher=teacher, generator=torch.Generator().manual_seed(draws), **kw, **cond)
        ct = ecm_loss(student, x_1, generator=torch.Generator().manual_seed(draws), **kw, **cond)
        oracle, ct = _grad(student, oracle), _grad(student, ct)
        bias += float((oracle - ct).pow(2).sum()) / batches
        norm += float(oracle.pow(2).sum()) / batches
        cos += float(torch.nn.functional.cosine_similarity(oracle, ct, dim=0)) / batches
    return GradientBias(bias, bias / norm, cos)
