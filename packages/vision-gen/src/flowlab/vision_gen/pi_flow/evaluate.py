"""pi-Flow's measures: mode coverage and sliced W on the toys; quality (digits-FD beside its floor, precision,
classifier accuracy and confidence), diversity (recall, class-histogram entropy, mean within-class pairwise
distance) and teacher alignment (RMS distance to the teacher's samples from the same noise) on digits."""

from __future__ import annotations

import torch

from flowlab.core.metrics import sliced_wasserstein
from flowlab.core.validation import check_tensor
from flowlab.vision_gen.kit.metrics import FeatureNetConfig
from flowlab.vision_gen.kit.quality import class_histogram, digits_prdc, fd_with_floor
from flowlab.vision_gen.pi_flow.toys import ToyTeacher

__all__ = ["digits_measures", "pairwise_distance", "toy_measures"]


def toy_measures(teacher: ToyTeacher, samples: torch.Tensor, *, generator: torch.Generator) -> dict[str, float]:
    """samples (n, 2): on_mode (share on a mode), coverage (share of the modes holding at least a quarter of their
    fair share), sliced_w (SW_2 to as many exact data draws, 256 directions)."""
    check_tensor(samples, "samples")
    mode = teacher.mode(samples)
    counts = torch.bincount(mode[mode >= 0], minlength=teacher.num_modes).double()
    fair = samples.shape[0] / teacher.num_modes
    data = teacher.sample(samples.shape[0], generator=generator)
    return {
        "on_mode": float((mode >= 0).double().mean()),
        "coverage": float((counts >= 0.25 * fair).double().mean()),
        "sliced_w": float(sliced_wasserstein(samples.double(), data.double(), generator=generator)),
    }


def pairwise_distance(samples: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean RMS pixel distance between distinct samples of the same label: samples (N, ...), labels (N,)."""
    flat = samples.flatten(1).double()
    total, pairs = 0.0, 0
    for c in labels.unique():
        group = flat[labels == c]
        n = group.shape[0]
        if n > 1:
            d = torch.cdist(group, group) / group.shape[1] ** 0.5
            total += float(d.sum())
            pairs += n * (n - 1)
    return total / max(pairs, 1)


def digits_measures(
    samples: torch.Tensor,
    labels: torch.Tensor,
    teacher_samples: torch.Tensor,
    *,
    repeats: int,
    seed: int,
    features: FeatureNetConfig | None = None,
) -> dict[str, float]:
    """samples, teacher_samples (N, 1, S, S) in [-1, 1] from the same noise and labels (N,): fd (and its floor at
    N), precision, recall, accuracy, confidence, entropy (of the class histogram), pairwise (within-class
    distance), alignment (RMS distance to the teacher's sample from the same noise)."""
    check_tensor(samples, "samples")
    if samples.shape != teacher_samples.shape:
        raise ValueError(f"teacher_samples: expected shape {tuple(samples.shape)}, got {tuple(teacher_samples.shape)}")
    samples = samples.clamp(-1, 1)
    fd = fd_with_floor(samples, repeats=repeats, seed=seed, features=features)
    prdc = digits_prdc(samples, features=features)
    hist = class_histogram(samples, labels, features=features)
    alignment = (samples - teacher_samples.clamp(-1, 1)).flatten(1).pow(2).mean(1).sqrt().mean()
    return {
        "fd": fd.fd,
        "fd_floor": fd.floor,
        "precision": float(prdc.precision),
        "recall": float(prdc.recall),
        "accuracy": hist.accuracy,
        "confidence": hist.confidence,
        "entropy": hist.entropy,
        "pairwise": pairwise_distance(samples, labels),
        "alignment": float(alignment),
    }
