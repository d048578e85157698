"""Sampling a trained model by deterministic DDIM (eta = 0) on the core's diffusion solver (the kit's `generate`,
trailing grid): images given a condition (e.g. s of real images: reconstruction-conditioned generation), or
unconditionally through the activation prior (sample s, then x | s)."""

from __future__ import annotations

import torch

from flowlab.core.validation import check_tensor
from flowlab.vision_gen.kit.sampling import generate
from flowlab.vision_gen.patronus.model import PatronusModel
from flowlab.vision_gen.patronus.prior import ActivationPrior

__all__ = ["check_sampling", "sample_images", "sample_unconditional"]


def check_sampling(model: PatronusModel, cond: torch.Tensor, noise: torch.Tensor, steps: int) -> None:
    """A ValueError naming the argument unless noise is (B, 1, S, S), cond (B, m), both finite, and steps >= 1."""
    size, m = model.config.size, model.config.num_prototypes
    check_tensor(noise, "noise")
    check_tensor(cond, "cond")
    if noise.dim() != 4 or tuple(noise.shape[1:]) != (1, size, size):
        raise ValueError(f"noise: expected (B, 1, {size}, {size}), got {tuple(noise.shape)}")
    if tuple(cond.shape) != (noise.shape[0], m):
        raise ValueError(f"cond: expected ({noise.shape[0]}, {m}), got {tuple(cond.shape)}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps: expected an integer >= 1, got {steps!r}")


def sample_images(model: PatronusModel, cond: torch.Tensor, noise: torch.Tensor, *, steps: int = 50) -> torch.Tensor:
    """Images (B, 1, S, S) in [-1, 1] from noise (B, 1, S, S) given the condition cond (B, m), in `steps` DDIM
    steps; deterministic (the same noise and condition give the same images)."""
    check_sampling(model, cond, noise, steps)
    return generate(model.field, noise, steps=steps, method="ddim", cond=cond.to(noise)).clamp(-1, 1)


def sample_unconditional(
    model: PatronusModel, prior: ActivationPrior, noise: torch.Tensor, prior_noise: torch.Tensor, *, steps: int = 50
) -> tuple[torch.Tensor, torch.Tensor]:
    """(images (B, 1, S, S), their conditions (B, m)): conditions drawn from `prior` from prior_noise (B, m), then
    images from noise (B, 1, S, S) given them."""
    cond = prior.sample(prior_noise, steps=steps)
    return sample_images(model, cond, noise, steps=steps), cond
