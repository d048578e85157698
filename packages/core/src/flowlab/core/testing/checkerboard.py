"""The 2-D checkerboard with its exact CondOT posterior mean and velocity.

Data x_1 is uniform on the 8 unit squares [i, i + 1] x [j, j + 1], i, j in {-2, -1, 0, 1}, i + j even (the
`flowlab.datasets` "checkerboard" toy); source x_0 ~ N(0, I); path x_t = t x_1 + (1 - t) x_0. Given x_t = x, x_1
is, per square, a product of normals N(x / t, ((1 - t) / t)^2) truncated to the square's sides, so E[x_1 | x_t] is a
weighted sum of truncated-normal means with weights the products of the sides' normal masses. Evaluated in float64
through log-CDF differences (stable in the tails) and cast back to the input dtype; t is clamped to
[1e-4, 1 - 1e-7] (at t = 0 the clamp moves E[x_1 | x_t] off the board's mean by at most 2e-3 for |x| < 10).
"""

from __future__ import annotations

import math

import torch

from flowlab.core.validation import check_tensor, check_time

__all__ = ["Checkerboard"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _log_mass(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """log(Phi(hi) - Phi(lo)) for lo < hi, flipped to the lower tail where both are positive."""
    flip = lo > 0
    lo, hi = torch.where(flip, -hi, lo), torch.where(flip, -lo, hi)
    log_hi, log_lo = torch.special.log_ndtr(hi), torch.special.log_ndtr(lo)
    return log_hi + torch.log(-torch.expm1(log_lo - log_hi))


class Checkerboard:
    """The 8-square checkerboard (see the module docstring); `velocity(x=x, t=t)` is a `VectorField`."""

    dim = 2

    def __init__(self) -> None:
        corners = [(i, j) for i in range(-2, 2) for j in range(-2, 2) if (i + j) % 2 == 0]
        self.corners = torch.tensor(corners, dtype=torch.float64)  # (8, 2)

    def __repr__(self) -> str:
        return "Checkerboard(squares=8)"

    def sample_data(self, n: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """n uniform draws on the board: (n, 2) float32 on the generator's device (CPU without one)."""
        device = generator.device if generator is not None else None
        square = torch.randint(0, len(self.corners), (n,), generator=generator, device=device)
        offset = torch.rand(n, 2, generator=generator, device=device, dtype=torch.float64)
        return (self.corners.to(offset.device)[square] + offset).float()

    def posterior_mean(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """E[x_1 | x_t = x]: x (B, 2), t (B,) -> (B, 2)."""
        check_tensor(x, "x")
        if x.dim() != 2 or x.shape[1] != 2:
            raise ValueError(f"x: expected shape (B, 2), got {tuple(x.shape)}")
        check_time(t, x.shape[0], "t")
        x64 = x.to(torch.float64)
        t64 = t.to(torch.float64).clamp(1e-4, 1 - 1e-7)[:, None, None]  # (B, 1, 1)
        lo = self.corners.to(x.device)[None]  # (1, 8, 2)
        s = (1 - t64) / t64
        alpha = (lo * t64 - x64[:, None]) / (1 - t64)
        beta = ((lo + 1) * t64 - x64[:, None]) / (1 - t64)
        log_z = _log_mass(alpha, beta)  # (B, 8, 2)
        log_pdf = lambda u: -0.5 * u**2 - _LOG_SQRT_2PI  # noqa: E731
        ratio = torch.exp(log_pdf(alpha) - log_z) - torch.exp(log_pdf(beta) - log_z)
        means = lo + s * (ratio - alpha)  # truncated-normal means per square and side
        weights = torch.softmax(log_z.sum(-1), dim=-1)  # (B, 8)
        return (weights[..., None] * means).sum(1).to(x.dtype)

    def velocity(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """u_t(x) = (E[x_1 | x] - x) / (1 - t): x (B, 2), t (B,) -> (B, 2)."""
        one_minus = (1 - t.to(torch.float64).clamp(max=1 - 1e-7))[:, None]
        return ((self.posterior_mean(x, t).to(torch.float64) - x.to(torch.float64)) / one_minus).to(x.dtype)
