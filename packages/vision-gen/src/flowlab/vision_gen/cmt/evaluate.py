"""Few-step sampling and quality of a consistency student, and the paper's gradient-bias measurement at
initialisation (Thm 5.1): the consistency-training gradient against the oracle one, whose target is the teacher's
ODE endpoint of the same state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.losses import ecm_target_level
from flowlab.core.solvers import consistency_sample, edm_sample
from flowlab.core.validation import expand_like
from flowlab.vision_gen.cmt.meanflow import MeanFlowStudent, meanflow_samples
from flowlab.vision_gen.cmt.model import PostConfig
from flowlab.vision_gen.cmt.objective import distance
from flowlab.vision_gen.kit.metrics import FeatureNetConfig
from flowlab.vision_gen.kit.quality import class_histogram, fd_with_floor

__all__ = [
    "GradientBias",
    "Quality",
    "few_step_quality",
    "few_step_samples",
    "gradient_bias",
    "oracle_endpoint",
    "quality",
]

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
    (B, 1, S, S); the student is put in eval mode (f(x; sigma_min) = x) and restored to its mode after. A
    `MeanFlowStudent` jumps through the same levels (`meanflow_samples`; no fresh noise)."""
    if isinstance(student, MeanFlowStudent):
        return meanflow_samples(student, labels, steps=steps, noise=noise, sigma_max=sigma_max, sigma_mid=sigma_mid)
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


def _grad(student: torch.nn.Module, loss: torch.Tensor, *, keep: bool = False) -> torch.Tensor:
    params = [p for p in student.parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=keep)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])


def oracle_endpoint(
    teacher: Any,
    x_t: torch.Tensor,
    t: torch.Tensor,
    *,
    steps: int = 64,
    sigma_min: float = 0.002,
    rho: float = 7.0,
    **cond: Any,
) -> torch.Tensor:
    """Psi_{t -> 0}(x_t): the EDM `teacher`'s probability-flow ODE from each state x_t: (B, ...) at its own level
    t: (B,) (> sigma_min) down to 0, by the Heun sampler on per-sample Karras grids of `steps` levels from t to
    sigma_min, then 0 (the last step Euler). No gradient."""
    if bool((t <= sigma_min).any()):
        raise ValueError(f"t: expected levels above sigma_min = {sigma_min:g}")
    ramp = torch.linspace(0, 1, steps, device=t.device, dtype=torch.float64)[:, None]
    hi, lo = t.to(torch.float64)[None] ** (1 / rho), sigma_min ** (1 / rho)
    sigmas = torch.cat([(hi + ramp * (lo - hi)) ** rho, torch.zeros(1, t.shape[0], dtype=torch.float64,
                                                                     device=t.device)])  # fmt: skip
    with torch.no_grad():
        return edm_sample(teacher, None, sigmas.to(x_t.dtype), x_init=x_t, **cond)


def gradient_bias(
    student: torch.nn.Module,
    teacher: Any,
    images: torch.Tensor,
    labels: torch.Tensor,
    config: PostConfig,
    *,
    batch_size: int = 256,
    batches: int = 4,
    oracle_steps: int = 64,
    metric: str = "pseudo_huber",
    seed: int = 0,
) -> GradientBias:
    """Thm 5.1's gradient bias of `student` at its current weights (vision-gen--cmt.md §6): per batch of real
    digits y, levels t ~ exp(N(p_mean, p_std^2)) (clamped to >= 2 sigma_min), r by `config`'s pairing, one e, and
    x_t = y + t e; the oracle loss d(f(x_t; t), Psi_{t->0}(x_t)) (the teacher's `oracle_endpoint`) against the
    consistency loss d(f(x_t; t), sg f(y + r e; r)) that post-training follows (y where r = 0); both unweighted,
    d = `metric`."""
    q, stage = config.pairing(0)
    g = torch.Generator().manual_seed(seed)
    device = images.device
    bias, norm, cos = 0.0, 0.0, 0.0
    for _ in range(batches):
        idx = torch.randint(0, images.shape[0], (batch_size,), generator=g).to(device)
        y, labels_b = images[idx], labels[idx]
        t = torch.exp(config.p_mean + config.p_std * torch.randn(batch_size, generator=g)).to(y)
        t = t.clamp_min(2 * student.sigma_min)
        r = ecm_target_level(t, q=q, stage=stage, k=config.k, b=config.b)
        e = torch.randn(y.shape, generator=g).to(y)
        x_t = y + expand_like(t, y) * e
        endpoint = oracle_endpoint(teacher, x_t, t, steps=oracle_steps, sigma_min=student.sigma_min, y=labels_b)
        with torch.no_grad():
            positive = expand_like(r > 0, y)
            level = torch.where(r > 0, r, t)
            target = torch.where(positive, student(x=y + expand_like(r, y) * e, sigma=level, y=labels_b), y)
        pred = student(x=x_t, sigma=t, y=labels_b)
        oracle = _grad(student, distance(pred, endpoint, metric).mean(), keep=True)
        ct = _grad(student, distance(pred, target, metric).mean())
        bias += float((oracle - ct).pow(2).sum()) / batches
        norm += float(oracle.pow(2).sum()) / batches
        cos += float(torch.nn.functional.cosine_similarity(oracle, ct, dim=0)) / batches
    return GradientBias(bias, bias / norm, cos)
