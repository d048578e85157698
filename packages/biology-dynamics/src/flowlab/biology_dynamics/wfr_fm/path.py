"""The Wasserstein–Fisher–Rao geodesic between two weighted Diracs, in closed form, and the WFR static cost.

Between m_0 δ_{x_0} and m_1 δ_{x_1} with Δ = x_1 − x_0, ‖Δ‖ < πδ, the WFR geodesic is a single Dirac m(s) δ_{x_s}
moving along the segment while its mass changes (local time s in [0, 1]):

    τ = tan(‖Δ‖ / 2δ),  S = sqrt(m_0 m_1 / (1 + τ²)),  ω = 2δτS,  A = m_0 + m_1 − 2S,  B = m_0 − S
    m(s) = A s² − 2B s + m_0
    x_s  = x_0 + 2δ Δ̂ [arctan((A s − B) / τS) − arctan(−B / τS)]
    u(s) = ω Δ̂ / m(s),  g(s) = (2A s − 2B) / m(s)          (d x_s / ds and d ln m / ds)

The arctan difference is evaluated as one `atan2`, which stays finite in the pure-growth limit Δ → 0 (x_s = x_0,
m(s) = ((1 − s)√m_0 + s√m_1)²). Its action ∫ m (½‖u‖² + ½δ² g²) ds equals ½ WFR² with
WFR² = 4δ² (m_0 + m_1 − 2 √(m_0 m_1) cos(‖Δ‖ / 2δ)).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from flowlab.core.validation import check_tensor

__all__ = ["WFRDiracPath", "WFRPathSample", "wfr_cost", "wfr_distance_sq"]

#: added inside the log of the static cost so that pairs beyond πδ get a large finite cost (≈ 23)
COST_EPS = 1e-10


def _check_delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta: expected a positive finite length scale, got {delta!r}")
    return float(delta)


def wfr_cost(delta: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The static WFR cost c(x, y) = −log(cos²(min(‖x − y‖ / 2δ, π/2)) + 1e-10) as a pairwise cost callable.

    The callable maps x: (n0, d), y: (n1, d) -> (n0, n1) (the `cost=` of the core's couplings). Without a
    gradient to keep it works in place on the distance matrix (one (n0, n1) array: 3.2 GB at 20,000 cells per side
    in float64, instead of five); the values are the same either way.
    """
    delta = _check_delta(delta)

    def cost(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        d = torch.cdist(x.flatten(1), y.flatten(1))
        if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad):
            return -torch.log(torch.cos((d / (2 * delta)).clamp_max(math.pi / 2)).square() + COST_EPS)
        return d.div_(2 * delta).clamp_max_(math.pi / 2).cos_().square_().add_(COST_EPS).log_().neg_()

    return cost


def wfr_distance_sq(x_0: torch.Tensor, x_1: torch.Tensor, m_0: torch.Tensor, m_1: torch.Tensor, delta: float):
    """Closed-form squared WFR distance between m_0 δ_{x_0} and m_1 δ_{x_1}: (B, d), (B, d), (B,), (B,) -> (B,).

    WFR² = 4δ² (m_0 + m_1 − 2 √(m_0 m_1) cos(min(‖Δ‖ / 2δ, π/2))) (beyond πδ the masses are destroyed and
    created rather than moved).
    """
    delta = _check_delta(delta)
    angle = ((x_1 - x_0).norm(dim=-1) / (2 * delta)).clamp_max(math.pi / 2)
    return 4 * delta**2 * (m_0 + m_1 - 2 * (m_0 * m_1).sqrt() * angle.cos())


@dataclass(frozen=True)
class WFRPathSample:
    """A point on the Dirac WFR geodesic and its targets.

    x_0, x_1, x_s, u: (B, d); m_0, m_1, s, m_s, g: (B,). u and g are rates per unit of real time (local-time rates
    divided by `dt`); `weight` = m_s / m_0 is the mass weight of the flow-matching loss.
    """

    x_0: torch.Tensor
    x_1: torch.Tensor
    m_0: torch.Tensor
    m_1: torch.Tensor
    s: torch.Tensor
    x_s: torch.Tensor
    m_s: torch.Tensor
    u: torch.Tensor
    g: torch.Tensor

    @property
    def weight(self) -> torch.Tensor:
        """The importance weight `m_s / m_0`: (B,)."""
        return self.m_s / self.m_0


class WFRDiracPath:
    """Closed-form WFR geodesics between weighted Diracs with length scale δ (`delta`).

    `sigma > 0` adds N(0, σ²) noise to x_s (the paper's travelling Gaussian; targets unchanged); the released
    code uses σ = 0 (default). δ → ∞ recovers the straight path of OT-CFM (u → Δ, g → 0 when m_0 = m_1).
    """

    def __init__(self, delta: float, *, sigma: float = 0.0) -> None:
        self.delta = _check_delta(delta)
        if isinstance(sigma, bool) or not isinstance(sigma, int | float) or not (math.isfinite(sigma) and sigma >= 0):
            raise ValueError(f"sigma: expected a non-negative finite noise width, got {sigma!r}")
        self.sigma = float(sigma)

    def __repr__(self) -> str:
        return f"WFRDiracPath(delta={self.delta:g}, sigma={self.sigma:g})"

    def reachable(self, x_0: torch.Tensor, x_1: torch.Tensor) -> torch.Tensor:
        """(B,) bool: pairs closer than πδ, between which mass can move (farther pairs must be dropped)."""
        return (x_1 - x_0).norm(dim=-1) < math.pi * self.delta

    def sample(
        self,
        x_0: torch.Tensor,
        x_1: torch.Tensor,
        m_0: torch.Tensor,
        m_1: torch.Tensor,
        s: torch.Tensor,
        *,
        dt: torch.Tensor | float = 1.0,
        generator: torch.Generator | None = None,
    ) -> WFRPathSample:
        """x_0, x_1: (B, d); m_0, m_1: (B,) positive masses; s: (B,) local times in [0, 1]; dt: real duration
        of the interval (a number or (B,)) -> WFRPathSample with rates per unit of real time."""
        check_tensor(x_0, "x_0")
        check_tensor(x_1, "x_1")
        if x_0.dim() != 2 or x_0.shape != x_1.shape:
            raise ValueError(f"x_0, x_1: expected equal shapes (B, d), got {tuple(x_0.shape)}, {tuple(x_1.shape)}")
        batch = x_0.shape[0]
        for name, v in (("m_0", m_0), ("m_1", m_1), ("s", s)):
            check_tensor(v, name)
            if v.shape != (batch,):
                raise ValueError(f"{name}: expected shape ({batch},), got {tuple(v.shape)}")
        if bool((m_0 <= 0).any()) or bool((m_1 <= 0).any()):
            raise ValueError("m_0, m_1: masses must be positive")
        if bool(((s < 0) | (s > 1)).any()):
            raise ValueError("s: local times must lie in [0, 1]")
        if not bool(self.reachable(x_0, x_1).all()):
            raise ValueError(f"x_0, x_1: pairs at distance >= πδ = {math.pi * self.delta:.4g}; drop them first")
        dt_t = torch.as_tensor(dt, dtype=x_0.dtype, device=x_0.device)
        if bool((dt_t <= 0).any()):
            raise ValueError("dt: interval durations must be positive")

        diff = x_1 - x_0
        norm = diff.norm(dim=-1)
        unit = diff / norm.clamp_min(torch.finfo(diff.dtype).tiny)[:, None]
        tau = torch.tan(norm / (2 * self.delta))
        S = (m_0 * m_1 / (1 + tau.square())).sqrt()
        omega = 2 * self.delta * tau * S
        A = m_0 + m_1 - 2 * S
        B = m_0 - S
        m_s = A * s.square() - 2 * B * s + m_0
        # arctan((As − B)/τS) − arctan(−B/τS) in one atan2 (both angles lie in (−π/2, π/2) since τS >= 0)
        q = tau * S
        angle = torch.atan2(A * s * q, q.square() - B * (A * s - B))
        x_s = x_0 + 2 * self.delta * angle[:, None] * unit
        if self.sigma > 0:
            x_s = x_s + self.sigma * torch.randn(x_s.shape, generator=generator, device=x_s.device, dtype=x_s.dtype)
        u = omega[:, None] * unit / (m_s * dt_t)[:, None]
        g = (2 * A * s - 2 * B) / m_s / dt_t
        return WFRPathSample(x_0=x_0, x_1=x_1, m_0=m_0, m_1=m_1, s=s, x_s=x_s, m_s=m_s, u=u, g=g)
