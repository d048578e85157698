"""Continuous-normalising-flow likelihoods: integrate the augmented state (x, delta) with d delta/dt = div v.

Along dx/dt = v(x, t) the density obeys d/dt log p_t(x_t) = -div v(x_t, t) (instantaneous change of variables,
Chen et al. 2018; FFJORD, Grathwohl et al. 2019), so with delta(grid[0]) = 0 and delta = int_{grid[0]}^{t} div v:
log p_{grid[0]}(x at grid[0]) = log p_{grid[-1]}(x at grid[-1]) + delta(grid[-1]).
`log_likelihood` runs the grid from data (t=1) to source (t=0) and `sample_with_log_likelihood` from source to data.

One field evaluation per Runge-Kutta stage yields both the slope and the divergence; stages whose weight b_s is zero
(the first stage of midpoint) need only the slope, so their divergence is never computed. Hutchinson probes are
drawn once per trajectory. Nothing inside the step loop synchronises with the host: call it under `torch.no_grad()`
or `torch.inference_mode()` for evaluation (the solve itself leaves inference mode, where older torch releases return
zero derivatives), or with `enable_grad=True` to differentiate the log-likelihood with respect to the inputs or the
field's parameters.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from flowlab.core.distributions import Generators
from flowlab.core.likelihood.divergence import (
    AUTO_EXACT_MAX_DIM,
    PROBES,
    basis_vectors,
    check_exact_dim,
    riemannian_geometry,
    sample_probes,
    velocity_and_divergence,
)
from flowlab.core.manifolds.base import Manifold
from flowlab.core.solvers.adaptive import ADAPTIVE_METHODS, solve_ode_adaptive
from flowlab.core.solvers.trajectory import Trajectory, batched_times, run_grid
from flowlab.core.validation import check_choice, check_grid, check_tensor, expand_like

__all__ = [
    "DIVERGENCES",
    "METHODS",
    "AugmentedState",
    "LikelihoodResult",
    "SampleLikelihood",
    "log_likelihood",
    "sample_with_log_likelihood",
]

DIVERGENCES = ("exact", "hutchinson")

#: Butcher tableaus (c, a, b) of the fixed-step methods: stage s runs at t + c_s h from x + h sum_j a_sj k_j
_TABLEAUS: dict[str, tuple[tuple[float, ...], tuple[tuple[float, ...], ...], tuple[float, ...]]] = {
    "euler": ((0.0,), ((),), (1.0,)),
    "midpoint": ((0.0, 0.5), ((), (0.5,)), (0.0, 1.0)),
    "heun": ((0.0, 1.0), ((), (1.0,)), (0.5, 0.5)),
    "rk4": ((0.0, 0.5, 0.5, 1.0), ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)), (1 / 6, 1 / 3, 1 / 3, 1 / 6)),
}
METHODS = tuple(_TABLEAUS)


class LogDensity(Protocol):
    """Anything with a log-density, e.g. `StandardNormal`: log_prob(x: (B, ...)) -> (B,)."""

    def log_prob(self, x: torch.Tensor) -> torch.Tensor: ...


@dataclass(frozen=True)
class AugmentedState:
    """x: (B, ...) and delta: (B,), the divergence integrated from the start of the grid to the current time."""

    x: torch.Tensor
    delta: torch.Tensor


@dataclass(frozen=True)
class LikelihoodResult:
    """log_prob: (B,) log p_1 of the input points (w.r.t. Lebesgue measure, or the Riemannian volume on a manifold);
    x_0: (B, ...) where the points land at the end of the grid (t=0); log_prob_source: (B,) the source log-density
    there; delta: (B,) = -int_0^1 div v dt, so log_prob = log_prob_source + delta; nfe: field evaluations;
    trajectory: with `return_trajectory`, the `AugmentedState` at every grid point (adaptive: at every grid time);
    left_manifold: (B,) bool on a manifold with a boundary at infinity (`Manifold.at_boundary`): points whose
    reverse flow reached that boundary, so no source mass reaches them and their log_prob is −inf."""

    log_prob: torch.Tensor
    x_0: torch.Tensor
    log_prob_source: torch.Tensor
    delta: torch.Tensor
    nfe: int
    trajectory: Trajectory | None = None
    left_manifold: torch.Tensor | None = None


@dataclass(frozen=True)
class SampleLikelihood:
    """x_1: (B, ...) the samples; log_prob: (B,) their model log-density; log_prob_source: (B,) the source log-density
    of the starting points; delta: (B,) = int_0^1 div v dt, so log_prob = log_prob_source - delta; nfe; trajectory;
    left_manifold: (B,) bool on a manifold with a boundary at infinity: samples the flow carried to that boundary
    (pinned there by the retraction; their log_prob is NaN, undefined)."""

    x_1: torch.Tensor
    log_prob: torch.Tensor
    log_prob_source: torch.Tensor
    delta: torch.Tensor
    nfe: int
    trajectory: Trajectory | None = None
    left_manifold: torch.Tensor | None = None


def log_likelihood(
    field: Callable[..., torch.Tensor],
    x: torch.Tensor,
    *,
    source: LogDensity | None = None,
    grid: torch.Tensor | None = None,
    method: str | None = None,
    divergence: str | None = None,
    num_probes: int = 1,
    probe: str = "rademacher",
    generator: Generators = None,
    manifold: Manifold | None = None,
    adaptive: bool = False,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    force: bool = False,
    return_trajectory: bool = False,
    enable_grad: bool = False,
    **cond: Any,
) -> LikelihoodResult:
    """log p_1(x) of the flow dx/dt = field(x=x, t=t, **cond) pushing `source` (at t=0) to the data (t=1).

    x: (B, ...) data points (on `manifold` when given). grid: (N + 1,) strictly decreasing times, normally from 1 to
    0 (e.g. `grids.uniform(N).flip(0)`); the source density is taken at grid[-1]. With `adaptive=True` the grid is
    only where states are reported (default [1, 0]) and a torchdiffeq solver chooses the steps.
    method: "euler" | "midpoint" | "heun" | "rk4" (default "midpoint"), or with `adaptive` one of
    `solvers.ADAPTIVE_METHODS` (default "dopri5"). divergence: "exact" | "hutchinson" (default exact for D <= 16
    event dimensions, Hutchinson above; exact refuses D > 64 unless `force=True`); Hutchinson draws `num_probes`
    `probe` vectors once (with `generator`) and averages their estimates at every step.
    source: any object with `log_prob(x) -> (B,)`; with `manifold` it defaults to `manifold.base_log_prob`.
    enable_grad: keep the autograd graph so the results can be differentiated (w.r.t. x and the field's parameters,
    e.g. to train by maximum likelihood); by default (evaluation) the integration records none and the results carry
    no graph, so memory does not grow with the steps (the divergence's own vector-Jacobian products still run).
    On a manifold (Euclidean, FlatTorus, Sphere, PoincareBall or a Product of them) the field is projected onto the
    tangent space, steps are those of `solvers.solve_ode_on_manifold`, and densities are w.r.t. the Riemannian volume.
    """
    _check_field(field)
    x = _check_points(x, "x", manifold)
    return _solve(
        field,
        x,
        grid,
        decreasing=True,
        source=source,
        method=method,
        divergence=divergence,
        num_probes=num_probes,
        probe=probe,
        generator=generator,
        manifold=manifold,
        adaptive=adaptive,
        atol=atol,
        rtol=rtol,
        force=force,
        return_trajectory=return_trajectory,
        cond=cond,
        enable_grad=enable_grad,
    )


def sample_with_log_likelihood(
    field: Callable[..., torch.Tensor],
    x_0: torch.Tensor,
    *,
    source: LogDensity | None = None,
    grid: torch.Tensor | None = None,
    method: str | None = None,
    divergence: str | None = None,
    num_probes: int = 1,
    probe: str = "rademacher",
    generator: Generators = None,
    manifold: Manifold | None = None,
    adaptive: bool = False,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    force: bool = False,
    return_trajectory: bool = False,
    enable_grad: bool = False,
    **cond: Any,
) -> SampleLikelihood:
    """Push source draws x_0: (B, ...) through the flow and return the samples with their model log-density.

    The same augmented integration as `log_likelihood`, forwards: grid (N + 1,) strictly increasing, normally from
    0 to 1 (with `adaptive`, default [0, 1]); `source` is the density of x_0 at grid[0]. Every option is as there.
    """
    _check_field(field)
    x_0 = _check_points(x_0, "x_0", manifold)
    return _solve(
        field,
        x_0,
        grid,
        decreasing=False,
        source=source,
        method=method,
        divergence=divergence,
        num_probes=num_probes,
        probe=probe,
        generator=generator,
        manifold=manifold,
        adaptive=adaptive,
        atol=atol,
        rtol=rtol,
        force=force,
        return_trajectory=return_trajectory,
        cond=cond,
        enable_grad=enable_grad,
    )


def _check_enable_grad(enable_grad: object) -> None:
    if not isinstance(enable_grad, bool):
        raise ValueError(f"enable_grad: expected a bool, got {enable_grad!r}")


def _solve(field, x, grid, **options):
    """`_solve_augmented`, out of inference mode. torch.func's vjp returns zeros under `torch.inference_mode()` in
    torch releases without the fix of pytorch#177318 (seen with torch 2.11 on CUDA: every NLL lost its divergence), so
    the solve runs with inference mode off, on normal copies of the tensors that may have been made under it."""
    if not torch.is_inference_mode_enabled():
        return _solve_augmented(field, x, grid, **options)
    with torch.inference_mode(False):
        cond = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in options.pop("cond").items()}
        return _solve_augmented(field, x.clone(), None if grid is None else grid.clone(), cond=cond, **options)


def _solve_augmented(
    field,
    x,
    grid,
    *,
    decreasing,
    source,
    method,
    divergence,
    num_probes,
    probe,
    generator,
    manifold,
    adaptive,
    atol,
    rtol,
    force,
    return_trajectory,
    cond,
    enable_grad,
):
    _check_enable_grad(enable_grad)
    with torch.set_grad_enabled(enable_grad):
        log_density = _log_density(source, manifold)
        if not isinstance(adaptive, bool):
            raise ValueError(f"adaptive: expected a bool, got {adaptive!r}")
        if adaptive:
            if manifold is not None:
                raise ValueError("adaptive: adaptive steps are not available on a manifold; pass a fixed grid")
            method = check_choice("dopri5" if method is None else method, ADAPTIVE_METHODS, "method")
            if grid is None:
                grid = torch.tensor([1.0, 0.0] if decreasing else [0.0, 1.0])
        else:
            method = check_choice("midpoint" if method is None else method, METHODS, "method")
            if grid is None:
                raise ValueError("grid: required for fixed-step integration (or pass adaptive=True)")
        _check_direction(grid, decreasing)
        directions, exact = _directions(x, divergence, num_probes, probe, generator, force)
        geometry = riemannian_geometry(manifold)

        def augmented(y: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return velocity_and_divergence(field, y, t, directions, exact=exact, geometry=geometry, cond=cond)

        left = None
        if adaptive:
            out, nfe = _integrate_adaptive(augmented, x, grid, method=method, atol=atol, rtol=rtol)
        else:
            out, nfe, left = _integrate_fixed(
                augmented,
                field,
                x,
                grid,
                method=method,
                manifold=manifold,
                return_trajectory=return_trajectory,
                cond=cond,
            )
        end = out.final if isinstance(out, Trajectory) else out
        trajectory = out if return_trajectory else None
        if decreasing:
            log_prob_source = log_density(end.x)
            return LikelihoodResult(
                log_prob=_mask_left(log_prob_source + end.delta, left, -math.inf, "reverse"),
                x_0=end.x,
                log_prob_source=log_prob_source,
                delta=end.delta,
                nfe=nfe,
                trajectory=trajectory,
                left_manifold=left,
            )
        log_prob_source = log_density(x)
        return SampleLikelihood(
            x_1=end.x,
            log_prob=_mask_left(log_prob_source - end.delta, left, math.nan, "forward"),
            log_prob_source=log_prob_source,
            delta=end.delta,
            nfe=nfe,
            trajectory=trajectory,
            left_manifold=left,
        )


def _integrate_fixed(augmented, field, x, grid, *, method, manifold, return_trajectory, cond):
    """Runge-Kutta on (x, delta); on a manifold the stages and steps follow `solve_ode_on_manifold` (euler moves
    by exp_x, the others are the projection method: ambient stages retracted with `projx`)."""
    c, a, b = _TABLEAUS[method]
    times = batched_times(grid, x)

    if manifold is None:
        retract = torch.addcmul
    elif method == "euler":

        def retract(y, h, u):
            return manifold.expmap(y, h * u)

    else:

        def retract(y, h, u):
            return manifold.projx(torch.addcmul(y, h, u))

    def slope(y, t):
        v = field(x=y, t=t, **cond)
        return v if manifold is None else manifold.proju(y, v)

    def step(i: int, state: AugmentedState, t: torch.Tensor, t_next: torch.Tensor) -> AugmentedState:
        dt = t_next - t
        h = expand_like(dt, state.x)
        slopes, div = [], None
        for s in range(len(b)):
            y = state.x if s == 0 else retract(state.x, *_combine(h, a[s], slopes))
            ts = t if c[s] == 0 else t + c[s] * dt
            if b[s] == 0:
                slopes.append(slope(y, ts))
                continue
            v, d = augmented(y, ts)
            slopes.append(v)
            div = b[s] * d if div is None else div + b[s] * d
        return AugmentedState(retract(state.x, *_combine(h, b, slopes)), torch.addcmul(state.delta, dt, div))

    left = None if manifold is None else manifold.at_boundary(x)

    def tracked(i: int, state: AugmentedState, t: torch.Tensor, t_next: torch.Tensor) -> AugmentedState:
        nonlocal left
        new = step(i, state, t, t_next)
        left = left | manifold.at_boundary(new.x)
        return new

    start = AugmentedState(x, torch.zeros(x.shape[0], device=x.device, dtype=x.dtype))
    out = run_grid(
        step if manifold is None else tracked, start, times, grid, return_trajectory=return_trajectory, callback=None
    )
    return out, (len(times) - 1) * len(b), left


def _mask_left(log_prob: torch.Tensor, left: torch.Tensor | None, fill: float, direction: str) -> torch.Tensor:
    """log_prob with `fill` where the flow left the manifold (see `LikelihoodResult.left_manifold`), and a warning."""
    if left is None or not bool(left.any()):
        return log_prob
    warnings.warn(
        f"{int(left.sum())} of {left.numel()} {direction} trajectories reached the manifold's boundary at infinity "
        f"(the field carries them off the manifold); their log_prob is {fill}",
        RuntimeWarning,
        stacklevel=4,
    )
    return log_prob.masked_fill(left, fill)


def _combine(h: torch.Tensor, coeffs: tuple[float, ...], slopes: list[torch.Tensor]):
    """(scale, direction) with scale * direction = h * sum_j coeffs_j slopes_j, folding a lone weight into h."""
    terms = [(w, k) for w, k in zip(coeffs, slopes, strict=True) if w != 0]
    if len(terms) == 1:
        return terms[0][0] * h, terms[0][1]
    return h, sum(w * k for w, k in terms)


def _integrate_adaptive(augmented, x, grid, *, method, atol, rtol):
    """The augmented state flattened into one (B, D + 1) tensor for `solvers.solve_ode_adaptive`."""
    shape, dim = x.shape, math.prod(x.shape[1:])

    def flat_field(*, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        v, d = augmented(x[:, :dim].reshape(shape), t)
        return torch.cat([v.reshape(shape[0], dim), d[:, None]], dim=1)

    start = torch.cat([x.reshape(shape[0], dim), x.new_zeros(shape[0], 1)], dim=1)
    sol = solve_ode_adaptive(flat_field, start, grid, method=method, atol=atol, rtol=rtol)
    states = AugmentedState(sol.states[..., :dim].reshape(-1, *shape), sol.states[..., dim])
    return Trajectory(times=sol.times, states=states), sol.nfe


def _directions(x, divergence, num_probes, probe, generator, force) -> tuple[torch.Tensor, bool]:
    dim = math.prod(x.shape[1:])
    if divergence is None:
        divergence = "exact" if dim <= AUTO_EXACT_MAX_DIM else "hutchinson"
    check_choice(divergence, DIVERGENCES, "divergence")
    check_choice(probe, PROBES, "probe")
    if divergence == "exact":
        check_exact_dim(dim, force)
        return basis_vectors(x), True
    return sample_probes(x, num_probes, probe=probe, generator=generator), False


def _log_density(source, manifold: Manifold | None) -> Callable[[torch.Tensor], torch.Tensor]:
    if source is None:
        if manifold is None:
            raise ValueError("source: required (an object with log_prob(x)) unless a manifold gives the base density")
        return manifold.base_log_prob
    if not callable(getattr(source, "log_prob", None)):
        raise ValueError(f"source: expected an object with a log_prob(x) method, got {type(source).__name__}")
    return source.log_prob


def _check_field(field) -> None:
    if not callable(field):
        raise ValueError(f"field: expected a callable field(x=..., t=...), got {type(field).__name__}")


def _check_points(x: torch.Tensor, name: str, manifold: Manifold | None) -> torch.Tensor:
    check_tensor(x, name, min_dim=2)
    if not x.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {x.dtype}")
    if manifold is not None:
        riemannian_geometry(manifold)  # an unsupported manifold is named before its points are checked
        manifold.check_point(x, name)
    return x


def _check_direction(grid: torch.Tensor, decreasing: bool) -> None:
    check_grid(grid, "grid")
    if bool(grid[1] < grid[0]) != decreasing:
        want = "decreasing (data t=1 -> source t=0)" if decreasing else "increasing (source t=0 -> data t=1)"
        raise ValueError(f"grid: expected {want} times, got {grid[0]:.4g} -> {grid[-1]:.4g}")
