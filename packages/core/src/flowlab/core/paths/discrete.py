"""Discrete mixture paths over token sequences: masked (absorbing) and uniform.

Each token of x_t: (B, L) is independently the data token x_1 with probability kappa_t and the source token x_0
otherwise, p_t(x | x_0, x_1) = kappa_t delta_{x_1} + (1 - kappa_t) delta_{x_0}, with kappa_t the `alpha` of a
`Schedule` (kappa_0 = 0 source, kappa_1 = 1 data for the usual schedules).

- `MaskedDiscretePath(kappa, mask_id)`: the source is the mask token everywhere (MDLM's absorbing process).
- `UniformDiscretePath(kappa, vocab_size)`: the source is a uniformly random token.

MDLM (Sahoo et al. 2024) runs paper time tau = 1 - t with masking probability 1 - exp(-sigma(tau)); its log-linear
noise sigma(tau) = -log(1 - (1 - eps) tau) is `LogLinearKappa(eps)`: kappa_t = eps + (1 - eps) t (eps = 0 is
`CondOT`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from flowlab.core.distributions import rand, randint
from flowlab.core.paths.base import DiscretePathSample
from flowlab.core.schedules import Schedule, ScheduleOutput
from flowlab.core.validation import check_same_batch, check_tensor, check_time

__all__ = ["LogLinearKappa", "MaskedDiscretePath", "MixtureDiscretePath", "UniformDiscretePath"]


class LogLinearKappa(Schedule):
    """MDLM's log-linear noise as a kappa schedule: alpha = kappa_t = eps + (1 - eps) t, sigma = 1 - kappa_t.

    The masked-diffusion loss weight kappa'_t / (1 - kappa_t) is then 1 / (1 - t) (MDLM's sigma'/expm1(sigma)).
    """

    def __init__(self, eps: float = 1e-3) -> None:
        if not 0 <= eps < 1:
            raise ValueError(f"eps: expected 0 <= eps < 1, got {eps}")
        self.eps = float(eps)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = kappa_t = eps + (1 - eps) t, sigma = 1 - kappa_t and their slopes 1 - eps and -(1 - eps),
        shaped like t."""
        kappa = self.eps + (1 - self.eps) * t
        slope = torch.full_like(t, 1 - self.eps)
        return ScheduleOutput(kappa, 1 - kappa, slope, -slope)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """The t with kappa_t / (1 - kappa_t) == snr: (snr / (1 + snr) - eps) / (1 - eps)."""
        return (snr / (1 + snr) - self.eps) / (1 - self.eps)


class MixtureDiscretePath(ABC):
    """Per-token mixture of the source x_0 and the data x_1 with weight kappa_t on the data (see module doc)."""

    def __init__(self, kappa: Schedule) -> None:
        if not isinstance(kappa, Schedule):
            raise ValueError(f"kappa: expected a flowlab.core.schedules.Schedule, got {type(kappa).__name__}")
        self.kappa = kappa

    def kappa_at(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kappa_t and its time derivative, shaped like t."""
        out = self.kappa(t)
        return out.alpha, out.d_alpha

    @abstractmethod
    def _check_tokens(self, x: torch.Tensor, name: str, *, source: bool) -> None:
        """Raise ValueError naming `name` when x is not a valid source (or data) token tensor."""

    @abstractmethod
    def sample_source(self, shape: tuple[int, ...], *, device=None, generator=None) -> torch.Tensor:
        """Source tokens x_0 of `shape` (B, L)."""

    def sample(
        self, x_0: torch.Tensor, x_1: torch.Tensor, t: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> DiscretePathSample:
        """x_0, x_1: (B, L) long tokens, t: (B,) -> DiscretePathSample with x_t: (B, L)."""
        for x, name in ((x_0, "x_0"), (x_1, "x_1")):
            check_tensor(x, name, min_dim=2)
            if x.dtype != torch.long:
                raise ValueError(f"{name}: expected integer tokens of dtype torch.long, got {x.dtype}")
        if x_0.shape != x_1.shape:
            raise ValueError(f"x_0, x_1: shapes differ, {tuple(x_0.shape)} vs {tuple(x_1.shape)}")
        check_time(t, check_same_batch(x_0=x_0, x_1=x_1))
        self._check_tokens(x_0, "x_0", source=True)
        self._check_tokens(x_1, "x_1", source=False)
        kappa, _ = self.kappa_at(t)
        keep = rand(x_1.shape, generator=generator, device=x_1.device, dtype=kappa.dtype)
        x_t = torch.where(keep < kappa.reshape(-1, *([1] * (x_1.dim() - 1))), x_1, x_0)
        return DiscretePathSample(x_0=x_0, x_1=x_1, t=t, x_t=x_t)


class MaskedDiscretePath(MixtureDiscretePath):
    """Absorbing path: each token is x_1 with probability kappa_t, else `mask_id`."""

    def __init__(self, kappa: Schedule, mask_id: int) -> None:
        super().__init__(kappa)
        if isinstance(mask_id, bool) or not isinstance(mask_id, int) or mask_id < 0:
            raise ValueError(f"mask_id: expected a non-negative integer token id, got {mask_id!r}")
        self.mask_id = mask_id

    def __repr__(self) -> str:
        return f"MaskedDiscretePath(kappa={self.kappa!r}, mask_id={self.mask_id})"

    def _check_tokens(self, x: torch.Tensor, name: str, *, source: bool) -> None:
        if source and not bool((x == self.mask_id).all()):
            raise ValueError(f"{name}: the masked path's source is the mask token {self.mask_id} everywhere")
        if not source and (bool((x < 0).any()) or bool((x == self.mask_id).any())):
            raise ValueError(f"{name}: expected non-negative data tokens other than the mask token {self.mask_id}")

    def sample_source(
        self, shape: tuple[int, ...], *, device: torch.device | str | None = None, generator=None
    ) -> torch.Tensor:
        """All-mask tokens of `shape` (B, L); `generator` is accepted for symmetry and unused."""
        return torch.full(tuple(shape), self.mask_id, dtype=torch.long, device=device)


class UniformDiscretePath(MixtureDiscretePath):
    """Uniform-noise path: each token is x_1 with probability kappa_t, else a uniformly random token."""

    def __init__(self, kappa: Schedule, vocab_size: int) -> None:
        super().__init__(kappa)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
            raise ValueError(f"vocab_size: expected an integer >= 2, got {vocab_size!r}")
        self.vocab_size = vocab_size

    def __repr__(self) -> str:
        return f"UniformDiscretePath(kappa={self.kappa!r}, vocab_size={self.vocab_size})"

    def _check_tokens(self, x: torch.Tensor, name: str, *, source: bool) -> None:
        if bool((x < 0).any()) or bool((x >= self.vocab_size).any()):
            raise ValueError(f"{name}: expected tokens in [0, {self.vocab_size})")

    def sample_source(
        self,
        shape: tuple[int, ...],
        *,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Uniform random tokens of `shape` (B, L)."""
        return randint(self.vocab_size, tuple(shape), generator=generator, device=device)
