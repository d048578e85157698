"""Source distributions, per-sample seeded noise and training-time samplers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy
import torch

from flowlab.core.validation import check_choice, check_tensor

__all__ = [
    "Generators",
    "StandardNormal",
    "multinomial",
    "multinomial_counts",
    "rand",
    "randint",
    "randn",
    "sample_times",
]

Generators = torch.Generator | Sequence[torch.Generator] | None


def _draw(sampler, shape: tuple[int, ...], generator: torch.Generator | None, device, dtype) -> torch.Tensor:
    """`sampler` (torch.randn or torch.rand) drawn on the generator's device, then moved to `device`."""
    source = generator.device if generator is not None else device
    out = sampler(shape, generator=generator, device=source, dtype=dtype)
    return out if device is None else out.to(device)


def _noise(sampler, shape, generator: Generators, device, dtype) -> torch.Tensor:
    if isinstance(generator, Sequence):
        if len(generator) != shape[0]:
            raise ValueError(f"generator: expected {shape[0]} per-sample generators, got {len(generator)}")
        return torch.stack([_draw(sampler, tuple(shape[1:]), g, device, dtype) for g in generator])
    return _draw(sampler, tuple(shape), generator, device, dtype)


def randn(
    shape: Sequence[int],
    *,
    generator: Generators = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Standard normal noise of `shape`. With a list of generators (one per sample, EDM-style), sample i depends only
    on generator i, so a batch can be split or reordered without changing any sample. Noise is drawn on each
    generator's device and moved to `device`, so a CPU generator serves a CUDA run with the same numbers."""
    return _noise(torch.randn, shape, generator, device, dtype)


def rand(
    shape: Sequence[int],
    *,
    generator: Generators = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Uniform U[0, 1) noise of `shape`, with the generator handling of `randn`."""
    return _noise(torch.rand, shape, generator, device, dtype)


def randint(
    high: int,
    shape: Sequence[int],
    *,
    generator: Generators = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Integers uniform on {0, ..., high - 1} (int64) of `shape`, with the generator handling of `randn`: drawn on
    the generator's device and moved to `device` (index draws for a CUDA batch from a CPU generator)."""
    if isinstance(high, bool) or not isinstance(high, int) or high < 1:
        raise ValueError(f"high: expected a positive integer, got {high!r}")
    return _noise(lambda size, **kw: torch.randint(high, size, **kw), shape, generator, device, None)


def multinomial(
    probs: torch.Tensor, num_samples: int, *, replacement: bool = False, generator: torch.Generator | None = None
) -> torch.Tensor:
    """torch.multinomial of probs: (K,) or (B, K) -> (num_samples,) or (B, num_samples) int64 on probs' device,
    drawn on the generator's device (a CPU generator serves CUDA probabilities with the same draws)."""
    source = generator.device if generator is not None else probs.device
    draw = torch.multinomial(probs.to(source), num_samples, replacement=replacement, generator=generator)
    return draw.to(probs.device)


def multinomial_counts(probs: torch.Tensor, total: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Counts of `total` draws from each categorical in probs: (..., K) -> (..., K) float64 summing to `total`, on
    probs' device. Seeded by `generator` (torch's default one when None): it seeds a NumPy generator, whose
    multinomial draws on the CPU, 8-10x faster than torch's binomials at moderate totals and the same numbers on
    every device (torch.distributions.Multinomial takes no generator)."""
    check_tensor(probs, "probs", min_dim=1, finite=False)  # the row sums below catch NaN and inf more cheaply
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise ValueError(f"total: expected a non-negative integer, got {total!r}")
    rows = probs.sum(-1, keepdim=True, dtype=torch.float64)
    if bool((probs < 0).any()) or not bool(((rows - 1).abs() <= 1e-6).all()):
        raise ValueError("probs: expected finite non-negative rows summing to 1")
    source = generator.device if generator is not None else torch.device("cpu")
    seed = int(torch.randint(2**63 - 1, (1,), generator=generator, device=source))
    p = (probs.detach().to("cpu", torch.float64) / rows.cpu()).numpy()
    counts = numpy.random.default_rng(seed).multinomial(total, p.reshape(-1, p.shape[-1]))
    return torch.from_numpy(counts.reshape(p.shape)).to(probs.device, torch.float64)


class StandardNormal:
    """N(0, scale^2 I) over events of shape `event_shape`."""

    def __init__(self, event_shape: Sequence[int], *, scale: float = 1.0) -> None:
        self.event_shape = tuple(int(s) for s in event_shape)
        if not scale > 0:
            raise ValueError(f"scale: expected a positive standard deviation, got {scale}")
        self.scale = float(scale)

    def sample(
        self,
        n: int,
        *,
        generator: Generators = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """-> (n, *event_shape)"""
        return self.scale * randn((n, *self.event_shape), generator=generator, device=device, dtype=dtype)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, *event_shape) -> (B,)"""
        check_tensor(x, "x")
        if tuple(x.shape[1:]) != self.event_shape:
            raise ValueError(f"x: expected event shape {self.event_shape}, got {tuple(x.shape[1:])}")
        d = math.prod(self.event_shape)
        sq = (x.reshape(x.shape[0], -1) / self.scale).pow(2).sum(-1)
        return -0.5 * sq - 0.5 * d * math.log(2 * math.pi) - d * math.log(self.scale)


def sample_times(
    n: int,
    *,
    dist: str = "uniform",
    loc: float = 0.0,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Training times t: (n,) in [0, 1]: `uniform` or `logit_normal` (sigmoid of N(loc, scale^2), SD3-style)."""
    check_choice(dist, ("uniform", "logit_normal"), "dist")
    if dist == "uniform":
        return _draw(torch.rand, (n,), generator, device, dtype)
    z = _draw(torch.randn, (n,), generator, device, dtype)
    return torch.sigmoid(loc + scale * z)
