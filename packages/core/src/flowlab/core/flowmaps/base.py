"""Two-time flow maps X_{s,t}: the exact-identity parametrisation, a teacher map by integration, time pairs.

A flow map transports a point x_s at time s to where the probability-flow ODE carries it at time t (s <= t in
core time, t=1 data). With X_{s,t}(x) = x + (t - s) v_{s,t}(x) (Euclidean) or exp_x((t - s) proj_x v_{s,t}(x))
(manifold) the boundary condition X_{s,s} = Id holds by construction and v_{t,t} is the instantaneous
velocity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import jvp

from flowlab.core.distributions import rand
from flowlab.core.manifolds.base import Manifold
from flowlab.core.solvers.manifold import solve_ode_on_manifold
from flowlab.core.solvers.ode import solve_ode
from flowlab.core.validation import check_tensor, check_time, expand_like

__all__ = [
    "DiagonalField",
    "FlowMapFromField",
    "ParametrisedFlowMap",
    "TimePairs",
    "check_flow_map_inputs",
    "diagonal_velocity",
    "flow_map_ends",
    "move_by_velocity",
    "sample_time_pairs",
    "stack_end_times",
]


def check_flow_map_inputs(
    x: torch.Tensor,
    s: torch.Tensor,
    t: torch.Tensor,
    *,
    manifold: Manifold | None = None,
    x_name: str = "x",
    ordered: bool = False,
) -> int:
    """Validate a flow-map call: `x: (B, ...)` finite (and on `manifold`), `s, t: (B,)` in [0, 1]; return B.

    `ordered=True` also requires s <= t (the forward direction of core time).
    """
    check_tensor(x, x_name)
    if manifold is not None:
        if not isinstance(manifold, Manifold):
            raise ValueError(f"manifold: expected a flowlab.core.manifolds Manifold or None, got {manifold!r}")
        manifold.check_point(x, x_name)
    batch = int(x.shape[0])
    check_time(s, batch, "s")
    check_time(t, batch, "t")
    if ordered and bool((s > t).any()):
        raise ValueError("s: every pair must satisfy s <= t (core time runs source -> data)")
    return batch


def move_by_velocity(x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, v: torch.Tensor, manifold: Manifold | None):
    """x + (t - s) v, or exp_x((t - s) proj_x v) on a manifold."""
    step = expand_like(t - s, x)
    if manifold is None:
        return x + step * v
    return manifold.expmap(x, step * manifold.proju(x, v))


class ParametrisedFlowMap(nn.Module):
    """X_{s,t}(x) = x + (t - s) v_{s,t}(x), or exp_x((t - s) proj_x v_{s,t}(x)) on `manifold`.

    `net(x=x, s=s, t=t, **cond) -> (B, ...)` is the raw two-time network (x: (B, ...), s, t: (B,)); on a
    manifold its output is projected onto the tangent space at x. `manifold=None` is flat space with any event
    shape. Calls validate their inputs (finite, on the manifold, times in [0, 1]); s > t is allowed (a
    backward jump).
    """

    def __init__(self, net: nn.Module, *, manifold: Manifold | None = None) -> None:
        super().__init__()
        if not callable(net):
            raise ValueError(f"net: expected a callable network, got {type(net).__name__}")
        if manifold is not None and not isinstance(manifold, Manifold):
            raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold, got {type(manifold).__name__}")
        self.net = net
        self.manifold = manifold

    def velocity(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """v_{s,t}(x): (B, ...), tangent at x on a manifold; v_{t,t} is the instantaneous velocity."""
        check_flow_map_inputs(x, s, t, manifold=self.manifold)
        v = self.net(x=x, s=s, t=t, **cond)
        if v.shape != x.shape:
            raise ValueError(f"net: output shape {tuple(v.shape)} differs from x's {tuple(x.shape)}")
        return v if self.manifold is None else self.manifold.proju(x, v)

    def forward(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """X_{s,t}(x): x: (B, ...), s, t: (B,) -> (B, ...)"""
        return move_by_velocity(x, s, t, self.velocity(x=x, s=s, t=t, **cond), self.manifold)

    @property
    def diagonal_field(self) -> DiagonalField:
        """The instantaneous field v_{t,t} as a `VectorField` (`field(x=x, t=t, **cond)`)."""
        return DiagonalField(self)


def flow_map_ends(
    flow_map: Any, *, x: torch.Tensor, s: torch.Tensor, ts: Sequence[torch.Tensor], **cond: Any
) -> list[torch.Tensor]:
    """X_{s,t}(x) for several end times from one start: x: (B, ...), s and each t in `ts`: (B,) -> one (B, ...) per
    end time. Uses `flow_map.ends(x=, s=, ts=)` where the map has one (an `AnchoredFlowMap` evaluates its teacher
    once for every end time), else one call on the stacked rows (tensor conditions repeated alongside)."""
    if hasattr(flow_map, "ends"):
        return list(flow_map.ends(x=x, s=s, ts=ts, **cond))
    x_k, s_k, t_k, cond_k = stack_end_times(x, s, ts, cond)
    return list(flow_map(x=x_k, s=s_k, t=t_k, **cond_k).chunk(len(ts)))


def stack_end_times(
    x: torch.Tensor, s: torch.Tensor, ts: Sequence[torch.Tensor], cond: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
    """The rows of one batched call for k = len(ts) end times: x (B, ...) and s (B,) repeated k times, the end times
    concatenated (k B,), tensor conditions repeated alongside (others passed as they are)."""
    k = len(ts)
    stacked = {name: torch.cat([v] * k) if torch.is_tensor(v) else v for name, v in cond.items()}
    return torch.cat([x] * k), torch.cat([s] * k), torch.cat(list(ts)), stacked


def diagonal_velocity(flow_map: Any, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
    """v_{t,t}(x) = d/dτ X_{t,τ}(x) at τ = t: x: (B, ...), t: (B,) -> (B, ...).

    Uses `flow_map.velocity(x=, s=t, t=t)` when the map has one, else one forward-mode JVP of the map in its
    end time.
    """
    if hasattr(flow_map, "velocity"):
        return flow_map.velocity(x=x, s=t, t=t, **cond)
    t = t.contiguous()
    _, dx = jvp(lambda tau: flow_map(x=x, s=t, t=tau, **cond), (t,), (torch.ones_like(t),))
    return dx


class DiagonalField:
    """Adapter: a flow map's instantaneous velocity v_{t,t} as a vector field `field(x=x, t=t, **cond)`."""

    def __init__(self, flow_map: Any) -> None:
        if not callable(flow_map):
            raise ValueError(f"flow_map: expected a callable flow map, got {type(flow_map).__name__}")
        self.flow_map = flow_map

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """v_{t,t}(x) of the wrapped flow map (see `diagonal_velocity`): x: (B, ...), t: (B,) -> (B, ...)."""
        return diagonal_velocity(self.flow_map, x=x, t=t, **cond)


class _NormalisedTimeField:
    """The ODE on the shared grid u in [0, 1] for per-sample intervals [s, t]: (t - s) v(x, lerp(s, t, u))."""

    def __init__(self, field: Any, s: torch.Tensor, t: torch.Tensor) -> None:
        self.field, self.s, self.t = field, s, t

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        u = t.expand(x.shape[0]) if t.dim() == 0 else t
        time = torch.lerp(self.s, self.t, u.to(self.s.dtype)).clamp(0.0, 1.0)
        return expand_like(self.t - self.s, x) * self.field(x=x, t=time, **cond)


class FlowMapFromField:
    """A teacher flow map by integration: X_{s,t}(x) solves dx/dτ = v(x, τ) from τ = s to τ = t per sample.

    Per-sample intervals share one normalised grid u in [0, 1] (time s + u (t - s)) of `steps` steps of
    `method` (the names `solve_ode` accepts, or `solve_ode_on_manifold` when `manifold` is given). Gradients
    flow through it; wrap calls in `torch.no_grad()` when it is a teacher.
    """

    def __init__(self, field: Any, steps: int, method: str = "rk4", *, manifold: Manifold | None = None) -> None:
        if not callable(field):
            raise ValueError(f"field: expected a callable vector field, got {type(field).__name__}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps: expected a positive integer, got {steps!r}")
        if manifold is not None and not isinstance(manifold, Manifold):
            raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold, got {type(manifold).__name__}")
        self.field, self.steps, self.method, self.manifold = field, steps, method, manifold

    def __call__(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """X_{s,t}(x): x: (B, ...), s, t: (B,) -> (B, ...)"""
        check_flow_map_inputs(x, s, t, manifold=self.manifold)
        grid = torch.linspace(0.0, 1.0, self.steps + 1, device=x.device, dtype=x.dtype)
        field = _NormalisedTimeField(self.field, s, t)
        if self.manifold is None:
            return solve_ode(field, x, grid, method=self.method, **cond)
        return solve_ode_on_manifold(field, x, grid, manifold=self.manifold, method=self.method, **cond)

    def velocity(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """v_{s,t}(x) = (X_{s,t}(x) - x) / (t - s) (log_x X / (t - s) on a manifold); v(x, t) where s = t."""
        end = self(x=x, s=s, t=t, **cond)
        gap = expand_like(t - s, x)
        safe = torch.where(gap == 0, torch.ones_like(gap), gap)
        jump = end - x if self.manifold is None else self.manifold.logmap(x, end)
        return torch.where(gap == 0, self.field(x=x, t=t, **cond), jump / safe)


@dataclass(frozen=True)
class TimePairs:
    """Time pairs for flow-map training: s, t: (B,) with s <= t; diagonal: (B,) bool marks s == t (FM term)."""

    s: torch.Tensor
    t: torch.Tensor
    diagonal: torch.Tensor


def sample_time_pairs(
    batch: int,
    *,
    diag_fraction: float = 0.25,
    max_gap: float | None = None,
    low: float = 0.0,
    high: float = 1.0,
    source_fraction: float = 0.0,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> TimePairs:
    """Draw (s, t) uniformly on {low <= s <= t <= high, t - s <= max_gap}; each pair independently lies on the
    diagonal s = t (t uniform on [low, high]) with probability `diag_fraction`.

    The gap d = t - s has density proportional to (range - d) on [0, max_gap] and s is uniform given d, which
    is the uniform law on the (clipped) triangle; it is drawn by inverting its CDF. GFM uses high = 1 - 1e-3.
    `source_fraction`: each off-diagonal pair independently starts at the source time s = low with this
    probability (its gap drawn as above), the jumps a one-step sampler makes; 0 (the default) draws nothing more.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch: expected a positive integer, got {batch!r}")
    if not 0.0 <= float(diag_fraction) <= 1.0:
        raise ValueError(f"diag_fraction: expected a value in [0, 1], got {diag_fraction!r}")
    if not 0.0 <= float(low) < float(high) <= 1.0:
        raise ValueError(f"low, high: expected 0 <= low < high <= 1, got low={low!r}, high={high!r}")
    span = float(high) - float(low)
    if max_gap is not None and not float(max_gap) > 0.0:
        raise ValueError(f"max_gap: expected a positive number or None, got {max_gap!r}")
    if not 0.0 <= float(source_fraction) <= 1.0:
        raise ValueError(f"source_fraction: expected a value in [0, 1], got {source_fraction!r}")
    gap = 1.0 if max_gap is None else min(float(max_gap) / span, 1.0)
    dtype = dtype or torch.get_default_dtype()

    def uniform() -> torch.Tensor:
        return rand((batch,), generator=generator, device=device, dtype=dtype)

    # normalised gap: density ∝ (1 - d) on [0, gap]; CDF F(d) = (d - d²/2) / (gap - gap²/2)
    d = 1.0 - torch.sqrt(1.0 - 2.0 * uniform() * (gap - 0.5 * gap * gap))
    s = (1.0 - d) * uniform()
    on_diag = uniform() < diag_fraction
    tau = uniform()
    if source_fraction > 0:
        s = torch.where(uniform() < source_fraction, torch.zeros_like(s), s)
    t = s + d
    s = torch.where(on_diag, tau, s)
    t = torch.where(on_diag, tau, t).clamp(max=1.0)
    s = (low + span * s).clamp(low, high)
    t = torch.maximum((low + span * t).clamp(low, high), s)
    return TimePairs(s=s, t=t, diagonal=on_diag)
