"""Sampling: N exp-map jumps of the flow map (GFM) or N exp-map Euler steps of the implicit flow v_{t,t} (RFM)."""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.grids import uniform
from flowlab.core.manifolds.base import Manifold
from flowlab.core.solvers import sample_flow_map, solve_ode_on_manifold

__all__ = ["SAMPLERS", "sample"]

SAMPLERS = ("jump", "euler")


def sample(
    flow_map: Any,
    n: int,
    *,
    manifold: Manifold,
    nfe: int,
    sampler: str = "jump",
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    x_0: torch.Tensor | None = None,
) -> torch.Tensor:
    """n samples (n, ambient_dim) on `manifold` with `nfe` network evaluations on the uniform grid 0 = t_0 < … < 1.

    sampler "jump": x <- X_{t_i, t_i+1}(x) (the flow map); "euler": x <- exp_x(h v_{t_i,t_i}(x)) (RFM and "RFM +
    few steps"). Source points are `manifold.random_base(n, generator)` unless x_0 is given. Runs under
    `torch.inference_mode()`.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler: expected one of {SAMPLERS}, got {sampler!r}")
    if isinstance(nfe, bool) or not isinstance(nfe, int) or nfe < 1:
        raise ValueError(f"nfe: expected a positive int, got {nfe!r}")
    device = torch.device(device)
    with torch.inference_mode():
        if x_0 is None:
            x_0 = manifold.random_base(n, generator=generator).to(device)
        manifold.check_point(x_0, "x_0")
        grid = uniform(nfe, device=device, dtype=x_0.dtype)
        if sampler == "jump":
            return sample_flow_map(flow_map, x_0, grid)
        return solve_ode_on_manifold(flow_map.diagonal_field, x_0, grid, manifold=manifold, method="euler")
