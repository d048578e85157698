"""Measuring a trained model: sample quality (digits-FD of reconstruction-conditioned and unconditional samples,
and of a plain DDPM's), linear probes of the condition vector, and the prototypes' diversity."""

from __future__ import annotations

import torch

from flowlab.vision_gen.kit.data import ImageSet
from flowlab.vision_gen.kit.quality import fd_with_floor
from flowlab.vision_gen.kit.sampling import batched, generate
from flowlab.vision_gen.kit.stats import linear_probe_accuracy
from flowlab.vision_gen.patronus.model import PatronusModel
from flowlab.vision_gen.patronus.prior import ActivationPrior
from flowlab.vision_gen.patronus.sample import sample_images, sample_unconditional

__all__ = ["CLOSED_LOOP", "conditions", "ddpm_quality", "probe_scores", "prototype_diversity", "sample_quality"]

#: the digits with a closed loop (the spec's "simple attribute")
CLOSED_LOOP = (0, 6, 8, 9)


def conditions(model: PatronusModel, images: torch.Tensor) -> torch.Tensor:
    """The condition vectors (N, m) of images (N, 1, S, S), 512 at a time, without gradients."""
    with torch.inference_mode():
        return batched(model.condition, images, 512)


def _noise(n: int, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(n, *shape, generator=torch.Generator().manual_seed(seed))


def sample_quality(
    model: PatronusModel, prior: ActivationPrior | None, reference: torch.Tensor, *, steps: int = 20, seed: int = 0
) -> dict[str, float]:
    """digits-FD against the test split of `len(reference)` samples: reconstruction-conditioned (fd: the condition
    of each reference image (N, 1, S, S), fresh seeded noise) and, with a prior, unconditional (fd_uncond); and the
    real-vs-real floor at that n (fd_floor)."""
    device = next(model.parameters()).device
    size = model.config.size
    noise = _noise(reference.shape[0], (1, size, size), seed).to(device)
    recon = sample_images(model, conditions(model, reference.to(device)), noise, steps=steps).cpu()
    fd = fd_with_floor(recon, "test", seed=seed)
    row = {"fd": fd.fd, "fd_floor": fd.floor}
    if prior is not None:
        prior_noise = _noise(reference.shape[0], (model.config.num_prototypes,), seed + 1).to(device)
        uncond, _ = sample_unconditional(model, prior, noise, prior_noise, steps=steps)
        row["fd_uncond"] = fd_with_floor(uncond.cpu(), "test", seed=seed).fd
    return row


def ddpm_quality(field, *, n: int, size: int, steps: int = 20, seed: int = 0) -> dict[str, float]:
    """digits-FD (and its floor) of n samples of an unconditional kit denoiser (DDIM from seeded noise); `fd` and
    `fd_uncond` are the same number, so the row lines up with the conditioned models'."""
    noise = _noise(n, (1, size, size), seed).to(next(field.parameters()).device)
    x = generate(field, noise, steps=steps, method="ddim").clamp(-1, 1).cpu()
    fd = fd_with_floor(x, "test", seed=seed)
    return {"fd": fd.fd, "fd_uncond": fd.fd, "fd_floor": fd.floor}


def probe_scores(model: PatronusModel, train: ImageSet, test: ImageSet) -> dict[str, float]:
    """Linear-probe test accuracy of the condition vector for the digit class (probe_class), a closed loop
    (probe_loop: digits 0, 6, 8, 9) and stroke mass (probe_ink: ink above the train split's median)."""
    device = next(model.parameters()).device
    feats = [conditions(model, d.x.to(device)).cpu() for d in (train, test)]
    loops = [torch.isin(d.y, torch.tensor(CLOSED_LOOP)).long() for d in (train, test)]
    median = (train.x + 1).sum((1, 2, 3)).median()
    ink = [((d.x + 1).sum((1, 2, 3)) > median).long() for d in (train, test)]
    return {
        "probe_class": linear_probe_accuracy(feats[0], train.y, feats[1], test.y),
        "probe_loop": linear_probe_accuracy(feats[0], loops[0], feats[1], loops[1]),
        "probe_ink": linear_probe_accuracy(feats[0], ink[0], feats[1], ink[1]),
    }


def prototype_diversity(model: PatronusModel, *, threshold: float = 0.95) -> dict[str, float]:
    """The prototypes' pairwise cosine similarity: mean (cos_mean), largest (cos_max), and the number of pairs
    above `threshold` (near_duplicates)."""
    cos = model.prototype_encoder.prototype_cosines()
    return {"cos_mean": float(cos.mean()), "cos_max": float(cos.max()),
            "near_duplicates": float((cos > threshold).sum())}  # fmt: skip
