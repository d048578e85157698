"""Noise schedules over core time t in [0, 1] (t=0 source, t=1 data): x_t = alpha_t x_1 + sigma_t x_0.

Every schedule gives alpha, sigma and their analytic time derivatives, the signal-to-noise ratio alpha/sigma
and its inverse, and the inverse of alpha (the time of a signal level: a discrete path's `kappa_inverse`).
Papers that run time the other way ("t=0 data") are converted with tau = 1 - t.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

__all__ = [
    "EDM",
    "VE",
    "VP",
    "CondOT",
    "Cosine",
    "DiscreteVP",
    "Polynomial",
    "Schedule",
    "ScheduleOutput",
    "snr_inverse",
]


@dataclass(frozen=True)
class ScheduleOutput:
    """alpha_t, sigma_t and their time derivatives, each shaped like the input `t`."""

    alpha: torch.Tensor
    sigma: torch.Tensor
    d_alpha: torch.Tensor
    d_sigma: torch.Tensor


class Schedule(ABC):
    """x_t = alpha(t) x_1 + sigma(t) x_0 over t in [0, 1]."""

    @abstractmethod
    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """t: any shape -> alpha, sigma, d_alpha/dt, d_sigma/dt of the same shape."""

    @abstractmethod
    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """The time t with alpha_t / sigma_t == snr (snr > 0)."""

    @abstractmethod
    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """The time t with alpha_t == alpha (alpha in the schedule's range), shaped like alpha; ValueError where
        alpha is constant."""

    def snr(self, t: torch.Tensor) -> torch.Tensor:
        """The signal-to-noise ratio alpha_t / sigma_t, shaped like t."""
        out = self(t)
        return out.alpha / out.sigma

    def log_snr(self, t: torch.Tensor) -> torch.Tensor:
        """lambda(t) = log(alpha_t / sigma_t), the half log-SNR used by DPM-Solver grids."""
        out = self(t)
        return torch.log(out.alpha) - torch.log(out.sigma)

    @property
    def prior_std(self) -> float:
        """Standard deviation of x_t at t=0 when x_0 ~ N(0, I) (sigma_0): N(0, sigma_max^2) for VE."""
        return float(self(torch.zeros((), dtype=torch.float64)).sigma)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def snr_inverse(schedule: Schedule, snr: torch.Tensor) -> torch.Tensor:
    """Functional form of `schedule.snr_inverse(snr)`."""
    return schedule.snr_inverse(snr)


class CondOT(Schedule):
    """Linear (rectified-flow) schedule: alpha = t, sigma = 1 - t."""

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = t, sigma = 1 - t, d_alpha = 1, d_sigma = -1, shaped like t."""
        one = torch.ones_like(t)
        return ScheduleOutput(t, 1 - t, one, -one)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """snr / (1 + snr)."""
        return snr / (1 + snr)

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """alpha itself (alpha = t)."""
        return alpha.clone()


class Polynomial(Schedule):
    """alpha = t^n, sigma = 1 - t^n."""

    def __init__(self, n: float) -> None:
        if not n > 0:
            raise ValueError(f"n: expected a positive exponent, got {n}")
        self.n = float(n)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = t^n, sigma = 1 - t^n and their derivatives n t^(n-1), -n t^(n-1), shaped like t."""
        a = t**self.n
        da = self.n * t ** (self.n - 1)
        return ScheduleOutput(a, 1 - a, da, -da)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """(snr / (1 + snr))^(1/n)."""
        return (snr / (1 + snr)) ** (1 / self.n)

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """alpha^(1/n)."""
        return alpha ** (1 / self.n)


class Cosine(Schedule):
    """alpha = sin(pi t / 2), sigma = cos(pi t / 2)."""

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = sin(pi t / 2), sigma = cos(pi t / 2) and their derivatives, shaped like t."""
        h = 0.5 * math.pi
        return ScheduleOutput(torch.sin(h * t), torch.cos(h * t), h * torch.cos(h * t), -h * torch.sin(h * t))

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """2 atan(snr) / pi."""
        return torch.atan(snr) * (2 / math.pi)

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """2 asin(alpha) / pi."""
        return torch.asin(alpha) * (2 / math.pi)


class VP(Schedule):
    """Variance-preserving SDE schedule (Song et al. 2021) with linear beta in paper time tau = 1 - t.

    alpha = exp(-B(tau)/2), B(tau) = beta_min tau + (beta_max - beta_min) tau^2 / 2, sigma = sqrt(1 - alpha^2).
    """

    def __init__(self, beta_min: float = 0.1, beta_max: float = 20.0) -> None:
        if not 0 <= beta_min < beta_max:
            raise ValueError(f"beta_min, beta_max: expected 0 <= beta_min < beta_max, got {beta_min}, {beta_max}")
        self.beta_min, self.beta_max = float(beta_min), float(beta_max)

    def _integral(self, tau: torch.Tensor) -> torch.Tensor:
        return self.beta_min * tau + 0.5 * (self.beta_max - self.beta_min) * tau**2

    def beta(self, tau: torch.Tensor) -> torch.Tensor:
        """The linear noise rate beta(tau) = beta_min + tau (beta_max - beta_min) at paper time tau = 1 - t."""
        return self.beta_min + tau * (self.beta_max - self.beta_min)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = exp(-B(tau)/2), sigma = sqrt(1 - alpha^2) at tau = 1 - t, and their t-derivatives, shaped like t."""
        tau = 1 - t
        alpha = torch.exp(-0.5 * self._integral(tau))
        sigma2 = -torch.expm1(-self._integral(tau))
        sigma = torch.sqrt(sigma2)
        d_alpha = 0.5 * self.beta(tau) * alpha  # d/dt = -d/dtau
        d_sigma = -(alpha**2) * 0.5 * self.beta(tau) / sigma
        return ScheduleOutput(alpha, sigma, d_alpha, d_sigma)

    def _time_of_integral(self, big_b: torch.Tensor) -> torch.Tensor:
        """The t = 1 - tau with B(tau) == big_b: the root tau >= 0 of 0.5 db tau^2 + beta_min tau - B = 0."""
        db = self.beta_max - self.beta_min
        tau = (-self.beta_min + torch.sqrt(self.beta_min**2 + 2 * db * big_b)) / db
        return 1 - tau

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """Solves the quadratic B(tau) = log(1 + 1/snr^2) for tau >= 0 and returns t = 1 - tau."""
        return self._time_of_integral(torch.log1p(snr.pow(-2)))

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """Solves the quadratic B(tau) = -2 log(alpha) for tau >= 0 and returns t = 1 - tau."""
        return self._time_of_integral(-2 * torch.log(alpha))


class _UnitAlpha(Schedule):
    """A schedule with alpha = 1 at every t (VE, EDM): sigma alone carries the noise level."""

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """Raises ValueError: alpha is 1 at every t, so no time is singled out (use `snr_inverse`)."""
        raise ValueError(f"alpha: {type(self).__name__} has alpha = 1 at every t; invert sigma with snr_inverse")


class VE(_UnitAlpha):
    """Variance-exploding schedule: alpha = 1, sigma = sigma_min (sigma_max / sigma_min)^(1 - t).

    The source at t=0 is N(0, sigma_max^2 I) (x_0 ~ N(0, I) scaled by sigma). `VE.score_sde(sigma)` gives the
    score-SDE form with diffusion g(tau) = sigma^tau and marginal std^2 = (sigma^(2 tau) - 1) / (2 ln sigma).
    """

    def __init__(self, sigma_min: float = 0.01, sigma_max: float = 50.0) -> None:
        if not 0 < sigma_min < sigma_max:
            raise ValueError(f"sigma_min, sigma_max: expected 0 < sigma_min < sigma_max, got {sigma_min}, {sigma_max}")
        self.sigma_min, self.sigma_max = float(sigma_min), float(sigma_max)
        self._log_ratio = math.log(self.sigma_max / self.sigma_min)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = 1, sigma = sigma_min (sigma_max / sigma_min)^(1 - t) and their derivatives, shaped like t."""
        sigma = self.sigma_min * torch.exp(self._log_ratio * (1 - t))
        return ScheduleOutput(torch.ones_like(t), sigma, torch.zeros_like(t), -self._log_ratio * sigma)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """The t with sigma_t = 1 / snr: 1 - log(1 / (snr sigma_min)) / log(sigma_max / sigma_min)."""
        return 1 - torch.log(1 / (snr * self.sigma_min)) / self._log_ratio

    @staticmethod
    def score_sde(sigma: float) -> ScoreSDEVE:
        """The score-SDE VE form with diffusion g(tau) = sigma^tau, as a `ScoreSDEVE`."""
        return ScoreSDEVE(sigma)


class ScoreSDEVE(_UnitAlpha):
    """Score-SDE VE form: alpha = 1, std(tau)^2 = (sigma^(2 tau) - 1) / (2 ln sigma), tau = 1 - t.

    Its diffusion coefficient is g(tau) = sigma^tau (`diffusion(t)`); std(0) = 0, so t=1 is exactly the data.
    """

    def __init__(self, sigma: float) -> None:
        if not sigma > 1:
            raise ValueError(f"sigma: expected sigma > 1, got {sigma}")
        self.sigma = float(sigma)
        self._log_sigma = math.log(self.sigma)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        tau = 1 - t
        var = torch.expm1(2 * tau * self._log_sigma) / (2 * self._log_sigma)
        std = torch.sqrt(var)
        g2 = torch.exp(2 * tau * self._log_sigma)
        d_std = -0.5 * g2 / std  # d/dt std = -(d var / dtau) / (2 std), d var/dtau = g^2
        return ScheduleOutput(torch.ones_like(t), std, torch.zeros_like(t), d_std)

    def diffusion(self, t: torch.Tensor) -> torch.Tensor:
        """g at core time t: sigma^(1 - t)."""
        return torch.exp((1 - t) * self._log_sigma)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        tau = torch.log1p(2 * self._log_sigma / snr**2) / (2 * self._log_sigma)
        return 1 - tau


class EDM(_UnitAlpha):
    """Karras et al. (2022) sigma ramp expressed over t: alpha = 1,
    sigma(t) = (sigma_max^(1/rho) + t (sigma_min^(1/rho) - sigma_max^(1/rho)))^rho.

    An N-point uniform t grid gives exactly EDM's sigma_i for i = 0..N-1.
    """

    def __init__(self, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0) -> None:
        if not 0 < sigma_min < sigma_max:
            raise ValueError(f"sigma_min, sigma_max: expected 0 < sigma_min < sigma_max, got {sigma_min}, {sigma_max}")
        if not rho > 0:
            raise ValueError(f"rho: expected rho > 0, got {rho}")
        self.sigma_min, self.sigma_max, self.rho = float(sigma_min), float(sigma_max), float(rho)
        self._lo = self.sigma_min ** (1 / self.rho)
        self._hi = self.sigma_max ** (1 / self.rho)

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = 1, the sigma ramp sigma(t) and their derivatives, shaped like t."""
        base = self._hi + t * (self._lo - self._hi)
        sigma = base**self.rho
        d_sigma = self.rho * base ** (self.rho - 1) * (self._lo - self._hi)
        return ScheduleOutput(torch.ones_like(t), sigma, torch.zeros_like(t), d_sigma)

    def sigma_to_t(self, sigma: torch.Tensor) -> torch.Tensor:
        """Inverse of the sigma ramp: the t with sigma(t) == sigma."""
        return (sigma ** (1 / self.rho) - self._hi) / (self._lo - self._hi)

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """`sigma_to_t(1 / snr)` (alpha = 1, so the SNR is 1 / sigma)."""
        return self.sigma_to_t(1 / snr)


class DiscreteVP(Schedule):
    """A discrete DDPM schedule given by `alphas_cumprod` (K values, index K-1 the noisiest).

    Index k sits at core time t_k = 1 - (k+1)/K with alpha = sqrt(abar_k), sigma = sqrt(1 - abar_k); between grid
    points the half log-SNR is interpolated linearly in t (and extrapolated linearly beyond the ends).
    """

    def __init__(self, alphas_cumprod: torch.Tensor) -> None:
        abar = torch.as_tensor(alphas_cumprod, dtype=torch.float64).flatten()
        if abar.numel() < 2 or not bool(((abar > 0) & (abar < 1)).all()):
            raise ValueError("alphas_cumprod: expected at least 2 values strictly inside (0, 1)")
        if not bool((abar[1:] < abar[:-1]).all()):
            raise ValueError("alphas_cumprod: expected a strictly decreasing sequence (index K-1 the noisiest)")
        self.alphas_cumprod = abar
        self.num_steps = abar.numel()
        # lambda at increasing t: reverse the index order.
        self._lam = (0.5 * (torch.log(abar) - torch.log1p(-abar))).flip(0)
        self._t = 1 - (torch.arange(self.num_steps, 0, -1, dtype=torch.float64)) / self.num_steps

    def __repr__(self) -> str:
        first, last = float(self.alphas_cumprod[0]), float(self.alphas_cumprod[-1])
        return f"DiscreteVP(num_steps={self.num_steps}, alphas_cumprod=[{first:.5g} .. {last:.5g}])"

    @classmethod
    def linear(cls, num_steps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02) -> DiscreteVP:
        """DDPM's linear schedule: `num_steps` betas evenly spaced from `beta_start` to `beta_end`."""
        betas = torch.linspace(beta_start, beta_end, num_steps, dtype=torch.float64)
        return cls(torch.cumprod(1 - betas, 0))

    @classmethod
    def scaled_linear(cls, num_steps: int = 1000, beta_start: float = 0.00085, beta_end: float = 0.012) -> DiscreteVP:
        """Stable Diffusion's scaled-linear schedule: `num_steps` values of sqrt(beta) evenly spaced from
        sqrt(`beta_start`) to sqrt(`beta_end`)."""
        betas = torch.linspace(beta_start**0.5, beta_end**0.5, num_steps, dtype=torch.float64) ** 2
        return cls(torch.cumprod(1 - betas, 0))

    @classmethod
    def from_diffusers(cls, scheduler: object) -> DiscreteVP:
        """From any diffusers scheduler exposing `alphas_cumprod`."""
        abar = getattr(scheduler, "alphas_cumprod", None)
        if abar is None:
            raise ValueError("scheduler: expected a diffusers scheduler with an `alphas_cumprod` attribute")
        return cls(torch.as_tensor(abar))

    def _lambda_and_slope(self, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        grid, lam = self._t.to(t.device), self._lam.to(t.device)
        tt = t.to(torch.float64)
        idx = torch.clamp(torch.searchsorted(grid, tt.detach().contiguous()) - 1, 0, self.num_steps - 2)
        t0, t1 = grid[idx], grid[idx + 1]
        l0, l1 = lam[idx], lam[idx + 1]
        slope = (l1 - l0) / (t1 - t0)
        return l0 + slope * (tt - t0), slope

    def __call__(self, t: torch.Tensor) -> ScheduleOutput:
        """alpha = sqrt(sigmoid(2 lambda)), sigma = sqrt(sigmoid(-2 lambda)) of the interpolated half log-SNR lambda(t),
        with their derivatives, in t's dtype."""
        lam, slope = self._lambda_and_slope(t)
        alpha = torch.sigmoid(2 * lam).sqrt()
        sigma = torch.sigmoid(-2 * lam).sqrt()
        # alpha^2 = sigmoid(2 lam): d alpha/dt = alpha sigma^2 dlam/dt, d sigma/dt = -sigma alpha^2 dlam/dt.
        d_alpha = alpha * sigma**2 * slope
        d_sigma = -sigma * alpha**2 * slope
        return ScheduleOutput(*(v.to(t.dtype) for v in (alpha, sigma, d_alpha, d_sigma)))

    def _time_of_lambda(self, lam: torch.Tensor) -> torch.Tensor:
        """The t (float64) whose interpolated half log-SNR is lam (float64; linear beyond the grid ends)."""
        grid, lams = self._t.to(lam.device), self._lam.to(lam.device)
        idx = torch.clamp(torch.searchsorted(lams, lam.contiguous()) - 1, 0, self.num_steps - 2)
        slope = (lams[idx + 1] - lams[idx]) / (grid[idx + 1] - grid[idx])
        return grid[idx] + (lam - lams[idx]) / slope

    def snr_inverse(self, snr: torch.Tensor) -> torch.Tensor:
        """The t whose interpolated half log-SNR is log(snr) (linear beyond the grid ends), in snr's dtype."""
        return self._time_of_lambda(torch.log(snr.to(torch.float64))).to(snr.dtype)

    def alpha_inverse(self, alpha: torch.Tensor) -> torch.Tensor:
        """The t whose half log-SNR is logit(alpha^2) / 2 (alpha^2 = sigmoid(2 lambda)), in alpha's dtype."""
        a2 = alpha.to(torch.float64).square()
        return self._time_of_lambda(0.5 * (torch.log(a2) - torch.log1p(-a2))).to(alpha.dtype)

    def timestep_of(self, t: torch.Tensor) -> torch.Tensor:
        """The (float) diffusers timestep k of core time t: k = K (1 - t) - 1."""
        return self.num_steps * (1 - t) - 1

    def time_of(self, timestep: torch.Tensor) -> torch.Tensor:
        """Core time of a diffusers timestep k: t = 1 - (k + 1) / K."""
        return 1 - (timestep + 1) / self.num_steps
