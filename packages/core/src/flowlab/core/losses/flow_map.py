"""Flow-map objectives, written once for flat space and any `Manifold` (the GFM losses are these functions).

Core time: s <= t, t = 1 data. `flow_map(x=x, s=s, t=t, **cond) -> X_{s,t}(x)`; objectives that need the
two-time velocity v_{s,t} (MeanFlow, the diagonal FM term, self-distillation teachers) call
`flow_map.velocity(x=, s=, t=)`. Teacher terms are computed under `torch.no_grad()` ("sg"). On a manifold
squared norms are ‖·‖²_g at the point the vectors live at and squared distances are d_g² = ‖log_X Y‖²_g;
`manifold=None` is flat space with any event shape. Every loss returns a scalar (`reduction="mean"|"sum"`) or
the per-sample values (B,) (`reduction="none"`). Derivatives use forward-mode `torch.func.jvp` (no double
backward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.func

from flowlab.core.flowmaps.base import check_flow_map_inputs, diagonal_velocity, flow_map_ends
from flowlab.core.losses.flow_matching import reduce_loss
from flowlab.core.manifolds.base import Manifold
from flowlab.core.paths.base import PathSample
from flowlab.core.validation import check_choice, check_tensor, check_time, expand_like

__all__ = [
    "LSD_DERIVATIVES",
    "MeanFlowTarget",
    "consistency_loss",
    "diagonal_fm_loss",
    "esd_loss",
    "lsd_loss",
    "meanflow_loss",
    "meanflow_target",
    "psd_loss",
    "pseudo_huber",
]

_REDUCTIONS = ("mean", "sum", "none")
#: how `lsd_loss` takes ∂_t X: forward-mode JVP, central or forward finite difference
LSD_DERIVATIVES = ("jvp", "fd", "fd_forward")


def pseudo_huber(sq: torch.Tensor, dim: int, c: float | None = None) -> torch.Tensor:
    """sqrt(d² + c²) − c of squared distances sq: (B,) between points with `dim` coordinates; c = None is the
    iCT/ECT constant 0.00054·sqrt(dim), c = 0 the plain distance."""
    c = 0.00054 * math.sqrt(dim) if c is None else float(c)
    return torch.sqrt(sq + c * c) - c


def _check_options(manifold: Manifold | None, reduction: str, weight: torch.Tensor | None, batch: int) -> None:
    if manifold is not None and not isinstance(manifold, Manifold):
        raise ValueError(f"manifold: expected a flowlab.core.manifolds.Manifold or None, got {type(manifold).__name__}")
    check_choice(reduction, _REDUCTIONS, "reduction")
    if weight is not None:
        check_tensor(weight, "weight")
        if weight.shape != (batch,):
            raise ValueError(f"weight: expected shape ({batch},) (one weight per sample), got {tuple(weight.shape)}")


def _check_map(flow_map: Any, name: str = "flow_map", *, velocity: bool = False) -> None:
    if not callable(flow_map):
        raise ValueError(f"{name}: expected a callable flow map X(x=, s=, t=), got {type(flow_map).__name__}")
    if velocity and not hasattr(flow_map, "velocity"):
        raise ValueError(f"{name}: needs a `velocity(x=, s=, t=)` method (e.g. a ParametrisedFlowMap)")


def _check_like(value: torch.Tensor, x: torch.Tensor, name: str) -> None:
    check_tensor(value, name)
    if value.shape != x.shape:
        raise ValueError(f"{name}: expected shape {tuple(x.shape)} (like x_s), got {tuple(value.shape)}")


def _jvp(fn: Any, primals: tuple, tangents: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """`torch.func.jvp` on contiguous copies (expanded, stride-0 inputs cannot carry tangents)."""
    return torch.func.jvp(fn, tuple(p.contiguous() for p in primals), tuple(v.contiguous() for v in tangents))


def _sq_norm(manifold: Manifold | None, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """‖u‖² of a tangent vector u at x: (B, ...) -> (B,); on a manifold u is projected to T_x M first."""
    if manifold is None:
        return u.pow(2).flatten(1).sum(1)
    u = manifold.proju(x, u)
    return manifold.inner(x, u, u)


def _sq_dist(manifold: Manifold | None, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d²(x, y) = ‖log_x y‖²_x: (B, ...) -> (B,)"""
    if manifold is None:
        return (y - x).pow(2).flatten(1).sum(1)
    u = manifold.logmap(x, y)
    return manifold.inner(x, u, u)


def _teacher_velocity(flow_map: Any, teacher: Any, x: torch.Tensor, t: torch.Tensor, cond: dict) -> torch.Tensor:
    """sg[v(x, t)] from `teacher(x=, t=)` or, when teacher is None, the flow map's own diagonal v_{t,t}."""
    with torch.no_grad():
        if teacher is None:
            return diagonal_velocity(flow_map, x=x, t=t, **cond).detach()
        return teacher(x=x, t=t, **cond).detach()


def _fd_time_derivative(flow_map, x_s, s, t, h, manifold, cond, *, central: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(X_{s,t}(x_s), its finite-difference ∂_t) in one `flow_map_ends` call: (B, ...) each. Central: the end times
    (t, t + h, t − h) clamped to [s, 1]; forward: (t, t + h), or near t = 1 the side of t inside [s, 1] with more
    room (at most h)."""
    if not (math.isfinite(h) and 0 < h < 0.5):
        raise ValueError(f"fd_step: expected a step in (0, 0.5), got {h!r}")
    if central:
        upper, lower = (t + h).clamp_max(1.0), torch.maximum(t - h, s)
        end, ahead, behind = flow_map_ends(flow_map, x=x_s, s=s, ts=(t, upper, lower), **cond)
        width = expand_like(upper - lower, end)
        if manifold is None:
            return end, (ahead - behind) / width
        return end, (manifold.logmap(end, ahead) - manifold.logmap(end, behind)) / width
    ahead, behind = (1.0 - t).clamp(0.0, h), (t - s).clamp(0.0, h)  # the room on each side, at most h
    other = torch.where(ahead >= behind, t + ahead, t - behind)
    end, beside = flow_map_ends(flow_map, x=x_s, s=s, ts=(t, other), **cond)
    width = expand_like(other - t, end)
    return end, ((beside - end) if manifold is None else manifold.logmap(end, beside)) / width


def lsd_loss(
    flow_map: Any,
    x_s: torch.Tensor,
    s: torch.Tensor,
    t: torch.Tensor,
    *,
    teacher: Any = None,
    manifold: Manifold | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    derivative: str = "jvp",
    fd_step: float = 1e-3,
    **cond: Any,
) -> torch.Tensor:
    """Lagrangian self-distillation ‖∂_t X_{s,t}(x_s) − sg[v_{t,t}(X_{s,t}(x_s))]‖² at X = X_{s,t}(x_s).

    x_s: (B, ...), s, t: (B,) with s <= t. `teacher`: a vector field `teacher(x=, t=)` giving the velocity target
    (a pretrained or EMA model); None uses the flow map's own diagonal v_{t,t}. ∂_t X by `derivative`:
    - "jvp": one forward-mode JVP in t (exact);
    - "fd": a central difference (log_X X_{s,t+h} − log_X X_{s,t−h}) / 2h with h = `fd_step`, one-sided where
      t ± h leaves [s, 1], the three maps in one batched call: no forward-mode pass, and the backward runs through
      plain forwards (error O(h²) plus float rounding of about 1e-7 / h);
    - "fd_forward": the forward difference log_X X_{s,t+h} / h (near t = 1 the wider side of t inside [s, 1]), two
      maps in one call, so a third fewer rows than "fd" (error O(h) plus the same rounding).
    """
    _check_map(flow_map)
    check_choice(derivative, LSD_DERIVATIVES, "derivative")
    batch = check_flow_map_inputs(x_s, s, t, manifold=manifold, x_name="x_s", ordered=True)
    _check_options(manifold, reduction, weight, batch)
    if derivative == "jvp":
        end, d_end = _jvp(lambda tau: flow_map(x=x_s, s=s, t=tau, **cond), (t,), (torch.ones_like(t),))
    else:
        end, d_end = _fd_time_derivative(flow_map, x_s, s, t, fd_step, manifold, cond, central=derivative == "fd")
    target = _teacher_velocity(flow_map, teacher, end.detach(), t, cond)
    return reduce_loss(_sq_norm(manifold, end, d_end - target), weight=weight, reduction=reduction)


def esd_loss(
    flow_map: Any,
    x_s: torch.Tensor,
    s: torch.Tensor,
    t: torch.Tensor,
    *,
    teacher: Any = None,
    stopgrad: str = "pushforward",
    manifold: Manifold | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Eulerian self-distillation ‖∂_s X_{s,t}(x_s) + dX_{s,t}(x_s)[v_{s,s}(x_s)]‖² (tangent at X_{s,t}(x_s)).

    x_s: (B, ...), s, t: (B,) with s <= t; the velocity v_{s,s} is always a teacher (sg), from `teacher(x=,
    t=)` or the map's own diagonal. `stopgrad="pushforward"` (default) also stops the gradient through the
    pushforward term dX[v] (two JVPs, the second without a graph); `"none"` differentiates the whole sum, got
    from one JVP with tangent (v, 1) in (x, s).
    """
    _check_map(flow_map)
    check_choice(stopgrad, ("pushforward", "none"), "stopgrad")
    batch = check_flow_map_inputs(x_s, s, t, manifold=manifold, x_name="x_s", ordered=True)
    _check_options(manifold, reduction, weight, batch)
    v = _teacher_velocity(flow_map, teacher, x_s, s, cond)
    if manifold is not None:
        v = manifold.proju(x_s, v)
    ones = torch.ones_like(s)
    if stopgrad == "none":
        end, total = _jvp(lambda x, sigma: flow_map(x=x, s=sigma, t=t, **cond), (x_s, s), (v, ones))
    else:
        end, d_s = _jvp(lambda sigma: flow_map(x=x_s, s=sigma, t=t, **cond), (s,), (ones,))
        with torch.no_grad():
            _, push = _jvp(lambda x: flow_map(x=x, s=s, t=t, **cond), (x_s,), (v,))
        total = d_s + push
    return reduce_loss(_sq_norm(manifold, end, total), weight=weight, reduction=reduction)


def psd_loss(
    flow_map: Any,
    x_s: torch.Tensor,
    s: torch.Tensor,
    t: torch.Tensor,
    *,
    teacher: Any = None,
    manifold: Manifold | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Progressive (shortcut, semigroup) self-distillation d²(X_{s,t}(x_s), sg[X_{u,t}(X_{s,u}(x_s))]), u=(s+t)/2.

    x_s: (B, ...), s, t: (B,) with s <= t. `teacher`: the flow map that makes the two half jumps (e.g. an EMA
    copy); None uses `flow_map` itself. No derivatives are taken.
    """
    _check_map(flow_map)
    if teacher is not None:
        _check_map(teacher, "teacher")
    batch = check_flow_map_inputs(x_s, s, t, manifold=manifold, x_name="x_s", ordered=True)
    _check_options(manifold, reduction, weight, batch)
    half = flow_map if teacher is None else teacher
    mid = 0.5 * (s + t)
    with torch.no_grad():
        target = half(x=half(x=x_s, s=s, t=mid, **cond), s=mid, t=t, **cond).detach()
    end = flow_map(x=x_s, s=s, t=t, **cond)
    return reduce_loss(_sq_dist(manifold, end, target), weight=weight, reduction=reduction)


@dataclass(frozen=True)
class MeanFlowTarget:
    """velocity: the model's v_{s,t}(x_s) (with its graph); target: the detached MeanFlow target; (B, ...)."""

    velocity: torch.Tensor
    target: torch.Tensor


def meanflow_target(
    flow_map: Any,
    x_s: torch.Tensor,
    s: torch.Tensor,
    t: torch.Tensor,
    dx_s: torch.Tensor,
    *,
    manifold: Manifold | None = None,
    **cond: Any,
) -> MeanFlowTarget:
    """The MeanFlow identity in core time: `MeanFlowTarget(velocity=u, target=...)`, both (B, ...) at x_s.

    u = v_{s,t}(x_s) (with its graph) and target = sg[u_cond + (t − s)·(∂_s u + ∂_x u·u_cond)] with u_cond =
    dx_s, the path velocity at time s (one JVP with tangent (u_cond, 1, 0) in (x, s, t)). On a manifold the
    target is projected onto T_{x_s}M. It follows from d/ds X_{s,t}(x_s) = 0 along the ODE with X = x + (t −
    s) u: with the marginal velocity as u_cond the target equals the exact average velocity (X_{s,t}(x_s) −
    x_s)/(t − s); with the conditional one it does so in conditional expectation (the target is affine in
    u_cond).
    """
    _check_map(flow_map, velocity=True)
    batch = check_flow_map_inputs(x_s, s, t, manifold=manifold, x_name="x_s", ordered=True)
    _check_like(dx_s, x_s, "dx_s")
    _check_options(manifold, "none", None, batch)
    u_cond = dx_s if manifold is None else manifold.proju(x_s, dx_s)
    u, du = _jvp(lambda x, sigma: flow_map.velocity(x=x, s=sigma, t=t, **cond), (x_s, s), (u_cond, torch.ones_like(s)))
    target = (u_cond + expand_like(t - s, x_s) * du).detach()
    if manifold is not None:
        target = manifold.proju(x_s, target)
    return MeanFlowTarget(velocity=u, target=target)


def meanflow_loss(
    flow_map: Any,
    x_s: torch.Tensor,
    s: torch.Tensor,
    t: torch.Tensor,
    dx_s: torch.Tensor,
    *,
    manifold: Manifold | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """MeanFlow ‖v_{s,t}(x_s) − sg[target]‖² (see `meanflow_target`); needs no separate diagonal FM term.

    x_s, dx_s: (B, ...) (a path sample at time s and its conditional velocity), s, t: (B,) with s <= t.
    """
    _check_options(manifold, reduction, weight, check_tensor(x_s, "x_s").shape[0])
    out = meanflow_target(flow_map, x_s, s, t, dx_s, manifold=manifold, **cond)
    return reduce_loss(_sq_norm(manifold, x_s, out.velocity - out.target), weight=weight, reduction=reduction)


def diagonal_fm_loss(
    flow_map: Any,
    sample: PathSample,
    *,
    manifold: Manifold | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Flow matching on the diagonal: ‖v_{t,t}(x_t) − dx_t‖² at x_t (Riemannian FM on a geodesic path sample)."""
    _check_map(flow_map)
    if not isinstance(sample, PathSample):
        raise ValueError(f"sample: expected a PathSample, got {type(sample).__name__}")
    batch = check_flow_map_inputs(sample.x_t, sample.t, sample.t, manifold=manifold, x_name="sample.x_t")
    _check_like(sample.dx_t, sample.x_t, "sample.dx_t")
    _check_options(manifold, reduction, weight, batch)
    v = diagonal_velocity(flow_map, x=sample.x_t, t=sample.t, **cond)
    return reduce_loss(_sq_norm(manifold, sample.x_t, v - sample.dx_t), weight=weight, reduction=reduction)


def consistency_loss(
    flow_map: Any,
    x_0: torch.Tensor,
    x_1: torch.Tensor,
    s: torch.Tensor,
    s_next: torch.Tensor,
    *,
    path: Any,
    target_map: Any = None,
    teacher: Any = None,
    metric: str = "l2",
    huber_c: float | None = None,
    manifold: Manifold | None = None,
    weight: torch.Tensor | None = None,
    reduction: str = "mean",
    **cond: Any,
) -> torch.Tensor:
    """Discrete consistency loss d(f_θ(x_s, s), sg[f_θ⁻(x̂_{s_next}, s_next)]) with f(x, s) = X_{s,1}(x).

    x_0, x_1: (B, ...) source and data samples; s < s_next: (B,) adjacent grid times; x_s = path.sample(x_0,
    x_1, s). Consistency training (`teacher=None`): x̂ is the same (x_0, x_1) pair at s_next. Consistency
    distillation: x̂ = teacher(x=x_s, s=s, t=s_next), a one-step teacher map (e.g. `FlowMapFromField(field, 1,
    "heun")`). `target_map`: the EMA network θ⁻ (None: θ itself, under no_grad). `metric`: "l2" (d²) or
    "pseudo_huber" (sqrt(d² + c²) − c, c = `huber_c`, default 0.00054·sqrt(D) with D the number of coordinates
    per sample).
    """
    _check_map(flow_map)
    for name, value in (("target_map", target_map), ("teacher", teacher)):
        if value is not None:
            _check_map(value, name)
    check_choice(metric, ("l2", "pseudo_huber"), "metric")
    if huber_c is not None and not float(huber_c) > 0.0:
        raise ValueError(f"huber_c: expected a positive number or None, got {huber_c!r}")
    if not hasattr(path, "sample"):
        raise ValueError(f"path: expected a path with .sample(x_0, x_1, t), got {type(path).__name__}")
    check_tensor(x_0, "x_0")
    _check_like(x_1, x_0, "x_1")
    batch = int(x_0.shape[0])
    check_time(s, batch, "s")
    check_time(s_next, batch, "s_next")
    if bool((s_next <= s).any()):
        raise ValueError("s_next: every entry must be later than s (s < s_next <= 1)")
    _check_options(manifold, reduction, weight, batch)

    x_s = path.sample(x_0, x_1, s).x_t
    one = torch.ones_like(s)
    target_net = flow_map if target_map is None else target_map
    with torch.no_grad():
        if teacher is None:
            x_next = path.sample(x_0, x_1, s_next).x_t
        else:
            x_next = teacher(x=x_s, s=s, t=s_next, **cond)
        target = target_net(x=x_next, s=s_next, t=one, **cond).detach()
    sq = _sq_dist(manifold, flow_map(x=x_s, s=s, t=one, **cond), target)
    if metric == "pseudo_huber":
        sq = pseudo_huber(sq, x_0[0].numel(), huber_c)
    return reduce_loss(sq, weight=weight, reduction=reduction)
