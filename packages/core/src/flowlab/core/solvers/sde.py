"""Euler-Maruyama integration of dx = f(x, t) dt + g(t) dW, and the SDE that shares an ODE's marginals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from flowlab.core.distributions import Generators, randn
from flowlab.core.paths.affine import AffinePath
from flowlab.core.solvers.trajectory import StepInfo, Trajectory, batched_times, check_callback, run_grid
from flowlab.core.typing import Prediction
from flowlab.core.validation import check_grid, check_tensor, expand_like

__all__ = ["Diffusion", "solve_sde", "velocity_to_sde_drift"]

#: g(t): a constant, or a callable of t: (B,) returning (B,) (one value per sample) or a tensor shaped like x.
Diffusion = float | Callable[[torch.Tensor], torch.Tensor]


def _diffusion_at(diffusion: Diffusion, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor | float:
    if not callable(diffusion):
        return diffusion
    g = diffusion(t)
    return expand_like(g, x) if g.dim() == 1 and x.dim() > 1 else g


def _check_diffusion(diffusion: Any, name: str) -> None:
    if callable(diffusion):
        return
    if not isinstance(diffusion, int | float) or not diffusion >= 0:
        raise ValueError(f"{name}: expected a non-negative number or a callable g(t), got {diffusion!r}")


def solve_sde(
    drift: Callable[..., torch.Tensor],
    diffusion: Diffusion,
    x_init: torch.Tensor,
    grid: torch.Tensor,
    *,
    generator: Generators = None,
    noise_projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
    noise_map: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    projection: Callable[[torch.Tensor], torch.Tensor] | None = None,
    return_trajectory: bool = False,
    callback: Callable[[StepInfo], Any] | None = None,
    **cond: Any,
) -> torch.Tensor | Trajectory:
    """Euler-Maruyama: x <- x + f(x, t) h + g(t) sqrt(|h|) P z, z ~ N(0, I), over the grid.

    drift: called as `drift(x=x, t=t, **cond)` with `x: (B, ...)`, `t: (B,)`, in the direction the grid runs
    (h = t_next - t may be negative); diffusion: g as a number or a callable g(t) -> (B,) or x-shaped;
    x_init: (B, ...); grid: (N + 1,) strictly monotone in [0, 1]; generator: one generator, or one per sample
    (sample i then depends only on its own generator); noise_projection: P, a linear map applied to every Gaussian
    increment, so the noise lives on a subspace (e.g. zero centre of mass for molecules); None is the identity.
    noise_map: a state-dependent square root of the diffusion matrix, `noise_map(x, z) -> G(x) z` (x-shaped), so
    the step adds g sqrt(|h|) G(x) z (e.g. the Wright-Fisher noise on the simplex, G G^T = diag(x) - x x^T);
    None is the identity.
    projection: applied to the state after every step, (B, ...) -> (B, ...), to keep an SDE on a constrained domain
    (e.g. `Simplex(K).projx` for a Jacobi diffusion on the simplex); None leaves the state as the step made it.
    Every step, the last included, adds noise. Returns the final state or, with `return_trajectory=True`, a
    `Trajectory`.
    """
    if not callable(drift):
        raise ValueError(f"drift: expected a callable drift(x=..., t=...), got {type(drift).__name__}")
    _check_diffusion(diffusion, "diffusion")
    check_tensor(x_init, "x_init")
    check_grid(grid, "grid")
    check_callback(callback)
    if noise_projection is not None and not callable(noise_projection):
        raise ValueError(f"noise_projection: expected a callable or None, got {type(noise_projection).__name__}")
    if noise_map is not None and not callable(noise_map):
        raise ValueError(f"noise_map: expected a callable noise_map(x, z) or None, got {type(noise_map).__name__}")
    if projection is not None and not callable(projection):
        raise ValueError(f"projection: expected a callable or None, got {type(projection).__name__}")
    times = batched_times(grid, x_init)
    shape, device, dtype = x_init.shape, x_init.device, x_init.dtype

    def step(i, x, t, t_next):
        dt = t_next - t
        noise = randn(shape, generator=generator, device=device, dtype=dtype)
        if noise_projection is not None:
            noise = noise_projection(noise)
        if noise_map is not None:
            noise = noise_map(x, noise)
        g = _diffusion_at(diffusion, t, x)
        x = torch.addcmul(x, expand_like(dt, x), drift(x=x, t=t, **cond))
        x = torch.addcmul(x, g * expand_like(dt.abs().sqrt(), x), noise)
        if projection is None:
            return x
        projected = projection(x)
        if not isinstance(projected, torch.Tensor) or projected.shape != x.shape:
            got = tuple(projected.shape) if isinstance(projected, torch.Tensor) else type(projected).__name__
            raise ValueError(f"projection: expected it to return the state's shape {tuple(x.shape)}, got {got}")
        return projected

    return run_grid(step, x_init, times, grid, return_trajectory=return_trajectory, callback=callback)


def velocity_to_sde_drift(
    field: Callable[..., torch.Tensor], path: AffinePath, g: Diffusion
) -> Callable[..., torch.Tensor]:
    """The drift u + g(t)^2 / 2 * grad log p_t of the forward-time (source -> data) SDE dx = drift dt + g dW
    whose marginals are those of the ODE dx = u dt, for any g.

    field: a velocity `VectorField` u; path: the `AffinePath` it was trained on (Gaussian source), whose
    `convert` gives the score from the velocity; g: as `solve_sde`'s diffusion (pass the same g there).
    The score diverges where sigma_t = 0 (t = 1 for CondOT), which Euler-Maruyama never evaluates.
    Returns a drift called as `drift(x=x, t=t, **cond)`.
    """
    if not callable(field):
        raise ValueError(f"field: expected a callable field(x=..., t=...), got {type(field).__name__}")
    if not isinstance(path, AffinePath):
        raise ValueError(f"path: expected an AffinePath, got {type(path).__name__}")
    _check_diffusion(g, "g")

    def drift(*, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        u = field(x=x, t=t, **cond)
        score = path.convert(u, x_t=x, t=t, source=Prediction.VELOCITY, target=Prediction.SCORE)
        gt = _diffusion_at(g, t, x)
        return u + 0.5 * gt * gt * score

    return drift
