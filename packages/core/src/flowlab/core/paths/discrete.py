"""Discrete mixture paths over token sequences: masked (absorbing) and uniform.

Each token of x_t: (B, L) is independently the data token x_1 with probability kappa_t and the source token x_0
otherwise, p_t(x | x_0, x_1) = kappa_t delta_{x_1} + (1 - kappa_t) delta_{x_0}, with kappa_t the `alpha` of a
`Schedule` (kappa_0 = 0 source, kappa_1 = 1 data for the usual schedules).

- `MaskedDiscretePath(kappa, mask_id)`: the source is the mask token everywhere (MDLM's absorbing process).
- `UniformDiscretePath(kappa, vocab_size)`: the source is a uniformly random token.

MDLM (Sahoo et al. 2024) runs paper time tau = 1 - t with masking probability 1 - exp(-sigma(tau)), so
kappa_t = exp(-sigma(1 - t)) is the unmasked (data) fraction at core time t. Its two noises are:

- log-linear, sigma(tau) = -log(1 - (1 - eps) tau): `LogLinearKappa(eps)`, kappa_t = eps + (1 - eps) t (eps = 0 is
  `CondOT`, MDLM's alpha_tau = 1 - tau);
- linear, sigma(tau) = sigma_min + tau (sigma_max - sigma_min): `LinearSigmaKappa(sigma_min, sigma_max)`,
  kappa_t = exp(-sigma_min - (1 - t)(sigma_max - sigma_min)) (SynCoGen: 1e-3 and 7).

`path.kappa_inverse(kappa)` (the schedule's `alpha_inverse`) gives the time at which a fraction kappa is data.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from flowlab.core.distributions import rand, randint
from flowlab.core.paths.base import DiscretePathSample
from flowlab.core.schedules import Schedule, ScheduleOutput
from flowlab.core.validation import check_same_batch, check_tensor, check_time

__all__ = ["LinearSigmaKappa", "LogLinearKappa", "MaskedDiscretePath", "MixtureDiscretePath", "UniformDiscretePath"]


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
        return self.alpha_inverse(snr / (1 + snr))

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """The t with kappa_t == alpha: (alpha - eps) / (1 - eps)."""
        return (alpha - self.eps) / (1 - self.eps)


class LinearSigmaKappa(Schedule):
    """MDLM's linear noise as a kappa schedule: alpha = kappa_t = exp(-sigma(1 - t)), sigma = 1 - kappa_t, with
    sigma(tau) = sigma_min + tau (sigma_max - sigma_min) in paper time tau = 1 - t.

    kappa runs from exp(-sigma_max) at t = 0 to exp(-sigma_min) at t = 1 (not exactly 0 and 1: a fraction
    exp(-sigma_min) of tokens stays masked at t = 1 unless a final step unmasks it). Its slope is
    (sigma_max - sigma_min) kappa_t, so the masked-diffusion loss weight kappa'_t / (1 - kappa_t) is MDLM's
    sigma'(tau) / expm1(sigma(tau)).
    """

    def __init__(self, sigma_min: float = 1e-3, sigma_max: float = 7.0) -> None:
        if not 0 <= sigma_min < sigma_max:
            raise ValueError(f"sigma_min, sigma_max: expected 0 <= sigma_min < sigma_max, got {sigma_min}, {sigma_max}")
        self.sigma_min, self.sigma_max = float(sigma_min), float(sigma_max)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = kappa_t, sigma = 1 - kappa_t and their slopes +-(sigma_max - sigma_min) kappa_t, shaped like t."""
        rate = self.sigma_max - self.sigma_min
        noise = self.sigma_min + (1 - t) * rate  # sigma(tau) at tau = 1 - t
        kappa = torch.exp(-noise)
        slope = rate * kappa
        return ScheduleOutput(kappa, -torch.expm1(-noise), slope, -slope)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """The t with kappa_t / (1 - kappa_t) == snr: sigma(1 - t) = log(1 + 1 / snr)."""
        return self._time_of_noise(torch.log1p(1 / snr))

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """The t with kappa_t == alpha: sigma(1 - t) = -log(alpha)."""
        return self._time_of_noise(-torch.log(alpha))

    def _time_of_noise(self, noise: torch.Tensor) -> torch.Tensor:
        """The t = 1 - tau with sigma(tau) == noise."""
        return 1 - (noise - self.sigma_min) / (self.sigma_max - self.sigma_min)


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

    def kappa_inverse(self, kappa: torch.Tensor) -> torch.Tensor:
        """The time t with kappa_t == kappa (the data fraction), shaped like kappa: the schedule's `alpha_inverse`."""
        return self.kappa.alpha_inverse(kappa)

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
