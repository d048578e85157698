"""Toy targets of the simplex comparison (spec section 6.2): independent positions, each drawn from one seeded
Dirichlet(0.5) categorical over K letters, and a first-order Markov chain (seeded Dirichlet(0.5) transition rows,
started from its stationary law); the KL of sampled letter (or adjacent-pair) frequencies to the target and the
chain's exact log-likelihood."""

from __future__ import annotations

from typing import NamedTuple

import torch

from flowlab.core.manifolds import Simplex

__all__ = [
    "MarkovTarget",
    "categorical_target",
    "empirical_kl",
    "markov_target",
    "pair_kl",
    "sample_categorical",
]


def categorical_target(letters: int, *, seed: int, concentration: float = 0.5) -> torch.Tensor:
    """A Dirichlet(`concentration`) draw over `letters` letters, the same for a given seed: (K,) float64."""
    if not (isinstance(letters, int) and letters >= 2):
        raise ValueError(f"letters: expected an int >= 2, got {letters!r}")
    g = torch.Generator().manual_seed(seed)
    draw = Simplex(letters).random_dirichlet(1, concentration, generator=g, dtype=torch.float64)[0].clamp_min(1e-12)
    return draw / draw.sum()


def _check_probs(probs: object, length: int | None = None) -> None:
    """probs: (K,), or with `length` also (length, K) (one law per position), non-empty, finite and >= 0, each row
    summing to 1 within 1e-6; else a ValueError naming `probs`."""
    is_tensor = isinstance(probs, torch.Tensor)
    rows = is_tensor and probs.dim() == 2 and length is not None and probs.shape[0] == length
    if not is_tensor or probs.numel() == 0 or not (probs.dim() == 1 or rows):
        shapes = "(K,)" if length is None else f"(K,) or ({length}, K)"
        got = tuple(probs.shape) if is_tensor else type(probs).__name__
        raise ValueError(f"probs: expected a non-empty {shapes} tensor of letter probabilities, got {got}")
    if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
        raise ValueError("probs: expected finite probabilities >= 0")
    error = float((probs.double().sum(-1) - 1).abs().max())
    if error > 1e-6:
        raise ValueError(f"probs: expected rows summing to 1 within 1e-6, off by up to {error:.3g}")


def sample_categorical(probs: torch.Tensor, n: int, length: int, *, generator: torch.Generator) -> torch.Tensor:
    """n sequences of `length` independent letters from probs (K,): (n, length) int64 on the generator's device."""
    _check_probs(probs)
    flat = torch.multinomial(probs.to(generator.device).float(), n * length, replacement=True, generator=generator)
    return flat.reshape(n, length)


def empirical_kl(letters: torch.Tensor, probs: torch.Tensor) -> float:
    """KL(empirical || target) of each position's letter frequencies, averaged over positions: letters (n, L),
    probs (K,) one law for every position or (L, K) one per position."""
    if letters.dim() != 2 or letters.dtype != torch.long:
        raise ValueError(f"letters: expected (n, L) int64, got {tuple(letters.shape)} {letters.dtype}")
    _check_probs(probs, letters.shape[1])
    k = probs.shape[-1]
    if bool(((letters < 0) | (letters >= k)).any()):
        raise ValueError(f"letters: expected values in [0, {k})")
    counts = torch.nn.functional.one_hot(letters.cpu(), k).sum(0).double()  # (L, K)
    freq = counts / counts.sum(-1, keepdim=True)
    terms = torch.where(freq > 0, freq * (freq.clamp_min(1e-300).log() - probs.double().log()), 0.0)
    return float(terms.sum(-1).mean())


class MarkovTarget(NamedTuple):
    """A first-order chain: `initial` (K,) float64 (the stationary law), `transition` (K, K) float64 rows."""

    initial: torch.Tensor
    transition: torch.Tensor

    def sample(self, n: int, length: int, *, generator: torch.Generator) -> torch.Tensor:
        """(n, length) int64 sequences on the generator's device (one batched draw per position)."""
        if not (isinstance(n, int) and n >= 1 and isinstance(length, int) and length >= 1):
            raise ValueError(f"n, length: expected ints >= 1, got {n!r}, {length!r}")
        initial, transition = self.initial.to(generator.device), self.transition.to(generator.device)
        x = [torch.multinomial(initial.float().expand(n, -1), 1, generator=generator)[:, 0]]
        for _ in range(length - 1):
            x.append(torch.multinomial(transition[x[-1]].float(), 1, generator=generator)[:, 0])
        return torch.stack(x, 1)

    def nll(self, x: torch.Tensor) -> torch.Tensor:
        """Exact negative log-likelihood per position of x (n, L) int64: (n,) float64."""
        x = x.cpu()
        log_p = self.initial.log()[x[:, 0]] + self.transition.log()[x[:, :-1], x[:, 1:]].sum(-1)
        return -log_p / x.shape[1]


def markov_target(letters: int, *, seed: int, concentration: float = 0.5) -> MarkovTarget:
    """Transition rows drawn from Dirichlet(`concentration`) with the seed, started from the stationary law."""
    if not (isinstance(letters, int) and letters >= 2):
        raise ValueError(f"letters: expected an int >= 2, got {letters!r}")
    g = torch.Generator().manual_seed(seed)
    rows = Simplex(letters).random_dirichlet(letters, concentration, generator=g, dtype=torch.float64)
    rows = rows.clamp_min(1e-12) / rows.clamp_min(1e-12).sum(-1, keepdim=True)
    values, vectors = torch.linalg.eig(rows.T)
    stationary = vectors[:, values.real.argmax()].real
    return MarkovTarget(stationary / stationary.sum(), rows)


def pair_kl(letters: torch.Tensor, target: MarkovTarget) -> float:
    """KL(empirical || target) of the adjacent-pair frequencies (x_i, x_(i+1)), averaged over the L - 1 pairs:
    letters (n, L) int64 (the chain is stationary, so every pair has the law diag(initial) transition)."""
    if letters.dim() != 2 or letters.dtype != torch.long or letters.shape[1] < 2:
        raise ValueError(f"letters: expected (n, L >= 2) int64, got {tuple(letters.shape)} {letters.dtype}")
    k = target.initial.numel()
    if bool(((letters < 0) | (letters >= k)).any()):
        raise ValueError(f"letters: expected values in [0, {k})")
    pairs = (letters[:, :-1] * k + letters[:, 1:]).cpu()
    return empirical_kl(pairs, (target.initial[:, None] * target.transition).reshape(-1))
