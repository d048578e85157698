"""Toy categorical targets of the simplex comparison (spec section 6.2): independent positions, each drawn from one
seeded Dirichlet(0.5) categorical over K letters, and the KL of sampled letter frequencies to it."""

from __future__ import annotations

import torch

from flowlab.core.manifolds import Simplex

__all__ = ["categorical_target", "empirical_kl", "sample_categorical"]


def categorical_target(letters: int, *, seed: int, concentration: float = 0.5) -> torch.Tensor:
    """A Dirichlet(`concentration`) draw over `letters` letters, the same for a given seed: (K,) float64."""
    if not (isinstance(letters, int) and letters >= 2):
        raise ValueError(f"letters: expected an int >= 2, got {letters!r}")
    g = torch.Generator().manual_seed(seed)
    draw = Simplex(letters).random_dirichlet(1, concentration, generator=g, dtype=torch.float64)[0].clamp_min(1e-12)
    return draw / draw.sum()


def sample_categorical(probs: torch.Tensor, n: int, length: int, *, generator: torch.Generator) -> torch.Tensor:
    """n sequences of `length` independent letters from probs (K,): (n, length) int64 on the generator's device."""
    flat = torch.multinomial(probs.to(generator.device).float(), n * length, replacement=True, generator=generator)
    return flat.reshape(n, length)


def empirical_kl(letters: torch.Tensor, probs: torch.Tensor) -> float:
    """KL(empirical || target) of each position's letter frequencies, averaged over positions: letters (n, L)."""
    if letters.dim() != 2 or letters.dtype != torch.long:
        raise ValueError(f"letters: expected (n, L) int64, got {tuple(letters.shape)} {letters.dtype}")
    k = probs.numel()
    if bool(((letters < 0) | (letters >= k)).any()):
        raise ValueError(f"letters: expected values in [0, {k})")
    counts = torch.nn.functional.one_hot(letters.cpu(), k).sum(0).double()  # (L, K)
    freq = counts / counts.sum(-1, keepdim=True)
    terms = torch.where(freq > 0, freq * (freq.clamp_min(1e-300).log() - probs.double().log()), 0.0)
    return float(terms.sum(-1).mean())
