"""Network-free velocity policies (pi-Flow): one network call at (x_src, t_src) builds a small closed-form field that
is rolled out with many cheap Euler sub-steps.

Core time on the CondOT path x_t = t x_1 + (1 - t) eps (t = 1 data; pi-Flow's sigma is 1 - t and its velocity
u = eps - x_data is minus ours). A policy predicts the data x̂_1(x, t) and returns the velocity
v(x, t) = (x̂_1 - x) / (1 - t); it is defined for t < 1.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import torch

from flowlab.core.distributions import rand, randint
from flowlab.core.validation import check_tensor, check_time, expand_like

__all__ = ["DXPolicy", "GMPolicy", "Policy", "average_velocity", "num_substeps", "rollout"]


@runtime_checkable
class Policy(Protocol):
    """A velocity policy: `velocity(x, t)` with x: (B, ...), t: (B,) in [0, 1); `detach()` cuts its graph."""

    def velocity(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The policy's velocity v(x, t): x: (B, ...), t: (B,) -> (B, ...)."""
        ...

    def detach(self) -> Policy:
        """A copy of the policy whose tensors are cut from the autograd graph."""
        ...


def _check_src(x_src: torch.Tensor, t_src: torch.Tensor) -> int:
    check_tensor(x_src, "x_src")
    batch = int(x_src.shape[0])
    check_time(t_src, batch, "t_src")
    if bool((t_src >= 1).any()):
        raise ValueError("t_src: the policy is built before the data end, expected t_src < 1")
    return batch


def _check_query(x: torch.Tensor, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    check_tensor(x, "x", finite=False)
    if tuple(x.shape) != shape:
        raise ValueError(f"x: expected shape {shape} (like x_src), got {tuple(x.shape)}")
    if not isinstance(t, torch.Tensor) or t.shape != (shape[0],):
        got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"t: expected shape ({shape[0]},) (one time per sample), got {got}")


class GMPolicy:
    """Gaussian-mixture policy (GMFlow): a mixture over the data x_1 given x_src, updated in closed form by x_t.

    At (x_src, t_src) the network outputs, in core-velocity units, K component means `means`: (B, K, *event), one
    log-std per component `logstd` (broadcastable to means, e.g. (B, K, 1, 1, 1)) and mixture `logits`
    (broadcastable to means, e.g. per-pixel (B, K, 1, H, W)): the mixture is independent over the dimensions where
    logits vary and Gaussian over those where it has size 1 (the channels). In data space the components are
    mu_k = x_src + (1 - t_src) means_k with variance var_k = (1 - t_src)² exp(2 logstd_k) (pi-Flow code units:
    means = -means_u). With a = t / (1 - t), zeta = a_t² - a_src² and nu = a_t x_t / (1 - t) - a_src x_src /
    (1 - t_src), the posterior given x_t has component means (var nu + mu) / (var zeta + 1) and log-weights
    logits + sum_channels [(mu nu - zeta mu² / 2 + var nu² / 2) / (var zeta + 1) - log(var zeta + 1) / 2] (the
    last two terms cancel in the softmax when all components share one variance).
    """

    def __init__(
        self,
        means: torch.Tensor,
        logstd: torch.Tensor,
        logits: torch.Tensor,
        x_src: torch.Tensor,
        t_src: torch.Tensor,
    ) -> None:
        batch = _check_src(x_src, t_src)
        check_tensor(means, "means", min_dim=2)
        if means.shape[0] != batch or tuple(means.shape[2:]) != tuple(x_src.shape[1:]):
            want = f"({batch}, K, {', '.join(map(str, x_src.shape[1:]))})"
            raise ValueError(f"means: expected shape {want}, got {tuple(means.shape)}")
        for name, value in (("logstd", logstd), ("logits", logits)):
            check_tensor(value, name, finite=name == "logstd")
            if value.dim() != means.dim() or any(a not in (1, b) for a, b in zip(value.shape, means.shape)):
                raise ValueError(
                    f"{name}: expected a shape broadcastable to means {tuple(means.shape)}, got {tuple(value.shape)}"
                )
        if bool(torch.isnan(logits).any()):
            raise ValueError("logits: contains NaN values")
        if logstd.shape[0] != batch or logstd.shape[1] != means.shape[1]:
            raise ValueError(f"logstd: expected one value per sample and component, got {tuple(logstd.shape)}")
        if logits.shape[0] != batch or logits.shape[1] != means.shape[1]:
            raise ValueError(f"logits: expected one value per sample and component, got {tuple(logits.shape)}")
        self.means, self.logstd, self.logits, self.x_src, self.t_src = means, logstd, logits, x_src, t_src

    @property
    def num_components(self) -> int:
        """K, the number of mixture components."""
        return int(self.means.shape[1])

    def _data_components(self) -> tuple[torch.Tensor, torch.Tensor]:
        sigma_src = expand_like(1 - self.t_src, self.means)
        mu = self.x_src.unsqueeze(1) + sigma_src * self.means
        var = (sigma_src * torch.exp(self.logstd)) ** 2
        return mu, var

    def predict_data(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """E[x_1 | x_src, x_t = x] under the mixture: x: (B, *event), t: (B,) -> (B, *event)"""
        _check_query(x, t, tuple(self.x_src.shape))
        mu, var = self._data_components()
        t = t.to(x.dtype)
        t_src = self.t_src.to(x.dtype)
        a_t, a_src = t / (1 - t), t_src / (1 - t_src)
        zeta = expand_like(a_t**2 - a_src**2, mu)
        nu = (expand_like(a_t / (1 - t), x) * x - expand_like(a_src / (1 - t_src), x) * self.x_src).unsqueeze(1)
        den = 1 + var * zeta
        post_mean = (var * nu + mu) / den
        delta = (mu * nu - 0.5 * zeta * mu**2 + 0.5 * var * nu**2) / den - 0.5 * torch.log(den)
        delta = delta.expand_as(mu)
        summed = tuple(d for d in range(2, mu.dim()) if self.logits.shape[d] == 1 and mu.shape[d] > 1)
        if summed:
            delta = delta.sum(dim=summed, keepdim=True)
        weights = torch.softmax(self.logits + delta, dim=1)
        return (weights * post_mean).sum(dim=1)

    def velocity(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """v(x, t) = (E[x_1 | x_src, x] - x) / (1 - t): (B, *event)"""
        return (self.predict_data(x, t) - x) / expand_like(1 - t.to(x.dtype), x)

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Keyword form of `velocity`, so the policy can be called as a vector field `field(x=x, t=t)`."""
        return self.velocity(x, t)

    def detach(self) -> GMPolicy:
        """A copy whose tensors are cut from the graph (for the rollout of pi-ID)."""
        return GMPolicy(*(v.detach() for v in (self.means, self.logstd, self.logits, self.x_src, self.t_src)))

    def temperature_(self, temperature: float) -> GMPolicy:
        """Sharpen (T < 1) or flatten (T > 1) the mixture: logits / T and each component's variance times T, the
        mixture density raised to the power 1 / T for well-separated components. In place; returns self."""
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
            raise ValueError(f"temperature: expected a positive number, got {temperature!r}")
        if temperature != 1:
            self.logits = self.logits / temperature
            self.logstd = self.logstd + 0.5 * math.log(temperature)
        return self

    def dropout_(self, p: float, *, generator: torch.Generator | None = None) -> GMPolicy:
        """Drop each component of each sample with probability p (logit -> -inf), never all of them (one random
        component of a sample that lost all is kept). In place; returns self."""
        if not 0.0 <= float(p) < 1.0:
            raise ValueError(f"p: expected a dropout probability in [0, 1), got {p!r}")
        batch, k = self.logits.shape[:2]
        device = self.logits.device
        drop = rand((batch, k), generator=generator, device=device) < p
        rescue = randint(k, (batch,), generator=generator, device=device)
        keep = ~drop | (torch.nn.functional.one_hot(rescue, k).bool() & drop.all(dim=1, keepdim=True))
        keep = keep.reshape(batch, k, *([1] * (self.logits.dim() - 2)))
        self.logits = self.logits.masked_fill(~keep, -math.inf)
        return self


class DXPolicy:
    """Data-grid policy: N data predictions x̂_1 at times `t_grid`, linearly interpolated in t (held constant
    outside the grid), with v(x, t) = (x̂_1(t) - x) / (1 - t).

    data_grid: (B, N, *event); t_grid: (B, N) strictly increasing per sample, or (N,) shared.
    """

    def __init__(self, data_grid: torch.Tensor, t_grid: torch.Tensor) -> None:
        check_tensor(data_grid, "data_grid", min_dim=2)
        batch, n = int(data_grid.shape[0]), int(data_grid.shape[1])
        check_tensor(t_grid, "t_grid")
        if t_grid.dim() == 1:
            t_grid = t_grid.expand(batch, -1)
        if tuple(t_grid.shape) != (batch, n):
            raise ValueError(f"t_grid: expected shape ({batch}, {n}) or ({n},), got {tuple(t_grid.shape)}")
        if n > 1 and not bool((t_grid[:, 1:] > t_grid[:, :-1]).all()):
            raise ValueError("t_grid: times must be strictly increasing along the grid")
        if bool((t_grid < 0).any()) or bool((t_grid > 1).any()):
            raise ValueError("t_grid: times must lie in [0, 1]")
        self.data_grid, self.t_grid = data_grid, t_grid

    def predict_data(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """x̂_1(t) by linear interpolation on the grid: (B, *event)"""
        _check_query(x, t, (self.data_grid.shape[0], *self.data_grid.shape[2:]))
        grid = self.t_grid.to(x.dtype)
        t = t.to(x.dtype).clamp(grid[:, 0], grid[:, -1])
        n = grid.shape[1]
        if n == 1:
            return self.data_grid[:, 0]
        hi = torch.searchsorted(grid.contiguous(), t[:, None]).clamp(1, n - 1)
        lo = hi - 1
        t_lo, t_hi = grid.gather(1, lo)[:, 0], grid.gather(1, hi)[:, 0]
        w = expand_like((t - t_lo) / (t_hi - t_lo), x)
        rows = torch.arange(x.shape[0], device=x.device)
        return (1 - w) * self.data_grid[rows, lo[:, 0]] + w * self.data_grid[rows, hi[:, 0]]

    def velocity(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """v(x, t) = (x̂_1(t) - x) / (1 - t): (B, *event)"""
        return (self.predict_data(x, t) - x) / expand_like(1 - t.to(x.dtype), x)

    def __call__(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Keyword form of `velocity`, so the policy can be called as a vector field `field(x=x, t=t)`."""
        return self.velocity(x, t)

    def detach(self) -> DXPolicy:
        """A copy whose tensors are cut from the graph (for the rollout of pi-ID)."""
        return DXPolicy(self.data_grid.detach(), self.t_grid.detach())


def _times(value: Any, x: torch.Tensor, name: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.dim() == 0:
            value = value.expand(x.shape[0])
        return check_time(value, x.shape[0], name).to(x.dtype)
    if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name}: expected a time in [0, 1] or a (B,) tensor, got {value!r}")
    return torch.full((x.shape[0],), float(value), device=x.device, dtype=x.dtype)


def num_substeps(t_start: Any, t_end: Any, substeps_per_unit: int) -> int:
    """round(max |t_end - t_start| * substeps_per_unit), at least 1 (one host read for tensor times)."""
    gap = t_end - t_start
    gap = float(gap.abs().max()) if isinstance(gap, torch.Tensor) else abs(float(gap))
    return max(1, round(gap * substeps_per_unit))


def rollout(
    policy: Any,
    x: torch.Tensor,
    t_start: float | torch.Tensor,
    t_end: float | torch.Tensor,
    *,
    substeps_per_unit: int = 128,
) -> torch.Tensor:
    """Euler sub-steps x <- x + v(x, t) (t_next - t) from t_start to t_end (< 1 where v is evaluated).

    x: (B, ...); t_start, t_end: floats or (B,) tensors. The number of sub-steps is round(Δt · substeps_per_unit)
    (at least 1, Δt the largest gap of the batch); per-sample gaps share one normalised grid.
    """
    if not hasattr(policy, "velocity"):
        raise ValueError(f"policy: expected a Policy with velocity(x, t), got {type(policy).__name__}")
    if isinstance(substeps_per_unit, bool) or not isinstance(substeps_per_unit, int) or substeps_per_unit < 1:
        raise ValueError(f"substeps_per_unit: expected a positive integer, got {substeps_per_unit!r}")
    check_tensor(x, "x")
    start, end = _times(t_start, x, "t_start"), _times(t_end, x, "t_end")
    n = num_substeps(t_start, t_end, substeps_per_unit)
    for i in range(n):
        t = torch.lerp(start, end, i / n)
        t_next = end if i == n - 1 else torch.lerp(start, end, (i + 1) / n)
        x = x + expand_like(t_next - t, x) * policy.velocity(x, t)
    return x


def average_velocity(
    policy: Any,
    x: torch.Tensor,
    t_start: float | torch.Tensor,
    t_end: float | torch.Tensor,
    *,
    substeps_per_unit: int = 128,
) -> torch.Tensor:
    """(rollout(x) - x) / (t_end - t_start): the policy's average velocity over the window, (B, ...)."""
    check_tensor(x, "x")
    gap = _times(t_end, x, "t_end") - _times(t_start, x, "t_start")
    if bool((gap == 0).any()):
        raise ValueError("t_end: the window must have non-zero length (t_end != t_start)")
    out = rollout(policy, x, t_start, t_end, substeps_per_unit=substeps_per_unit)
    return (out - x) / expand_like(gap, x)
