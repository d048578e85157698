"""Evaluation: geodesic-kernel MMD to held-out data at several NFEs beside its noise floor, test NLL from the
implicit flow v_{t,t}, the semigroup defect of the flow map, and how far samples stray from the manifold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from flowlab.core.gfm.sample import sample
from flowlab.core.grids import uniform
from flowlab.core.likelihood import log_likelihood
from flowlab.core.manifolds import FlatTorus, PoincareBall, Sphere, wrap
from flowlab.core.manifolds.base import Manifold, check_count
from flowlab.core.metrics.mmd import median_bandwidth, mmd
from flowlab.core.paths.geodesic import GeodesicPath
from flowlab.core.validation import check_tensor

__all__ = [
    "MAX_REFERENCE",
    "evaluate_nll",
    "geodesic_mmd",
    "manifold_error",
    "mmd_by_nfe",
    "mmd_split_floor",
    "reference_bandwidth",
    "semigroup_error",
]

#: the reference rows an MMD compares against (the geodesic kernel matrices grow quadratically)
MAX_REFERENCE = 2000


def reference_bandwidth(x: torch.Tensor, *, manifold: Manifold, max_points: int = 2000) -> float:
    """The median geodesic distance between distinct points of x (the first `max_points` rows): the kernel width
    h shared by every method's MMD in one evaluation."""
    x = x[:max_points]
    half = len(x) // 2
    return median_bandwidth(x[:half], x[half:], manifold=manifold)


def _unbiased_mmd2(
    x: torch.Tensor, y: torch.Tensor, *, manifold: Manifold, bandwidth: float | Sequence[float]
) -> float:
    """The unbiased MMD² (a U-statistic: it can be negative) in float64, x: (N, n), y: (M, n)."""
    with torch.no_grad():
        return float(mmd(x.double(), y.double(), bandwidth=bandwidth, manifold=manifold, unbiased=True))


def geodesic_mmd(x: torch.Tensor, y: torch.Tensor, *, manifold: Manifold, bandwidth: float | Sequence[float]) -> float:
    """The signed root sign(s) √|s| of the unbiased MMD² s with k = Σ_h exp(−d_g²/(2h²)) over the bandwidth(s) h:
    x: (N, n), y: (M, n). Never clipped at 0: s has mean 0 on two samples of one law, so their MMD is about as often
    negative as positive, mostly within ± `mmd_split_floor`."""
    sq = _unbiased_mmd2(x, y, manifold=manifold, bandwidth=bandwidth)
    return math.copysign(math.sqrt(abs(sq)), sq)


def mmd_split_floor(
    y: torch.Tensor, *, manifold: Manifold, bandwidth: float | Sequence[float], draws: int = 10, seed: int = 0
) -> float:
    """The MMD's noise floor on y: (m, n), √(RMS of the unbiased MMD² between two disjoint random halves of y over
    `draws` seeded splits): the size `geodesic_mmd` takes between two samples of one law, each of half y's size. A
    model whose |MMD| to y is near or below it is within the statistic's sampling noise, where the MMD no longer
    ranks models (the floor of larger samples is lower, so against more than m/2 model samples it is conservative)."""
    check_tensor(y, "y", min_dim=2)
    if y.shape[0] < 4:
        raise ValueError(f"y: expected at least 4 points to split in halves, got {y.shape[0]}")
    check_count(draws, "draws")
    gen, half = torch.Generator().manual_seed(seed), y.shape[0] // 2
    squares = []
    for _ in range(draws):
        order = torch.randperm(y.shape[0], generator=gen).to(y.device)
        part = y[order[: 2 * half]]
        squares.append(_unbiased_mmd2(part[:half], part[half:], manifold=manifold, bandwidth=bandwidth) ** 2)
    return (sum(squares) / draws) ** 0.25


def mmd_by_nfe(
    flow_map: Any,
    reference: torch.Tensor,
    *,
    manifold: Manifold,
    nfes: Sequence[int] = (1, 2, 4, 8, 100),
    sampler: str = "jump",
    n: int = 2000,
    bandwidth: float | Sequence[float],
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    max_reference: int = MAX_REFERENCE,
) -> dict[int, float]:
    """{nfe: MMD(model samples, reference)} (`geodesic_mmd`) with `n` samples per NFE (the same source draws for every
    NFE) against the first `max_reference` reference rows."""
    reference = reference[:max_reference]
    x_0 = manifold.random_base(n, generator=generator).to(device)
    out = {}
    for k in nfes:
        x = sample(flow_map, n, manifold=manifold, nfe=k, sampler=sampler, x_0=x_0, device=device)
        out[k] = geodesic_mmd(x, reference.to(x), manifold=manifold, bandwidth=bandwidth)
    return out


def evaluate_nll(
    flow_map: Any,
    x: torch.Tensor,
    *,
    manifold: Manifold,
    steps: int = 200,
    method: str = "rk4",
    batch: int = 1024,
) -> torch.Tensor:
    """−log p_1(x) per point (B,) in nats w.r.t. the Riemannian volume, from the implicit flow v_{t,t} by the
    Riemannian change of variables (exact tangent-space divergence for dim <= 16) on a fixed grid of `steps`
    steps of `method`, from data (t=1) to the manifold's base density at t=0. Runs under `no_grad`: the divergence's
    `torch.func.vjp` does not need the outer graph, and with it the graph to the parameters grew every step (README)."""
    grid = uniform(steps, device=x.device, dtype=x.dtype).flip(0)
    field = flow_map.diagonal_field
    parts = []
    with torch.no_grad():
        for chunk in x.split(batch):
            res = log_likelihood(field, chunk, grid=grid, method=method, manifold=manifold)
            parts.append(-res.log_prob)
    return torch.cat(parts)


def semigroup_error(
    flow_map: Any,
    x_0: torch.Tensor,
    x_1: torch.Tensor,
    *,
    manifold: Manifold,
    generator: torch.Generator,
    relative: bool = False,
) -> float:
    """Mean d_g(X_{u,t}(X_{s,u}(I_s)), X_{s,t}(I_s)) over random s < u < t (u the midpoint) on held-out path points
    I_s between source draws x_0 and data x_1: (B, n). Zero for an exact flow map. `relative=True` divides by the
    mean jump length d_g(I_s, X_{s,t}(I_s)), so a map that barely moves does not look consistent."""
    b = len(x_0)
    a, c = torch.rand(b, generator=generator), torch.rand(b, generator=generator)
    s, t = (torch.minimum(a, c) * 0.999).to(x_0), (torch.maximum(a, c) * 0.999).to(x_0)
    u = 0.5 * (s + t)
    with torch.no_grad():
        x_s = GeodesicPath(manifold).sample(x_0, x_1, s).x_t
        two = flow_map(x=flow_map(x=x_s, s=s, t=u), s=u, t=t)
        one = flow_map(x=x_s, s=s, t=t)
        defect = float(manifold.dist(one, two).mean())
        return defect / float(manifold.dist(x_s, one).mean()) if relative else defect


def manifold_error(x: torch.Tensor, manifold: Manifold) -> float:
    """How far points are from the manifold: max |‖x‖ − 1| on a sphere, max ‖x‖ (must stay < 1/√c) on the
    Poincaré ball, max |wrap(x) − x| on the flat torus; NaN elsewhere."""
    with torch.no_grad():
        if isinstance(manifold, Sphere):
            return float((x.norm(dim=-1) - 1).abs().max())
        if isinstance(manifold, PoincareBall):
            return float(x.norm(dim=-1).max())
        if isinstance(manifold, FlatTorus):
            return float((wrap(x) - x).abs().max())
    return math.nan
