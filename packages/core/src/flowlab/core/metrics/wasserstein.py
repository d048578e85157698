"""Wasserstein distances through POT: exact W_p (`ot.emd2`), entropic (`ot.sinkhorn2`), and sliced W_p.

All take samples x: (N, ...), y: (M, ...) (a 1-D tensor is N scalar samples) and return a differentiable 0-d
tensor on the inputs' device (POT's torch backend carries gradients through the plan's cost).
"""

from __future__ import annotations

import math

import torch

from flowlab.core.couplings import cost_matrix
from flowlab.core.distributions import randn
from flowlab.core.manifolds.base import Manifold
from flowlab.core.metrics.mmd import _cost, _weights
from flowlab.core.validation import check_choice, check_tensor

__all__ = ["sinkhorn_distance", "sinkhorn_distance_batched", "sliced_wasserstein", "wasserstein"]


def _samples(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    check_tensor(x, "x")
    check_tensor(y, "y")
    x, y = (v.unsqueeze(1) if v.dim() == 1 else v for v in (x, y))
    if x.shape[1:] != y.shape[1:]:
        raise ValueError(f"x, y: event shapes differ, {tuple(x.shape[1:])} vs {tuple(y.shape[1:])}")
    return x, y


def _check_p(p: float) -> float:
    if not (isinstance(p, int | float) and math.isfinite(p) and p >= 1):
        raise ValueError(f"p: expected an order p >= 1, got {p!r}")
    return float(p)


def _ground_cost(x: torch.Tensor, y: torch.Tensor, p: float, manifold: Manifold | None) -> torch.Tensor:
    """d(x_i, y_j)^p: (N, M), with a gradient-safe square root at coincident points."""
    sq = cost_matrix(x, y, _cost(manifold))
    if p == 2:
        return sq
    return sq.clamp_min(torch.finfo(sq.dtype).tiny).pow(p / 2)


def _quantile_cost(u: torch.Tensor, v: torch.Tensor, p: float) -> torch.Tensor:
    """W_p^p between uniform empirical 1-D measures, batched over columns: u: (N, L), v: (M, L) -> (L,).

    The quantile functions are piecewise constant on the merged levels {i/N} ∪ {j/M}; each piece contributes
    its width times |F_u^{-1} - F_v^{-1}|^p.
    """
    u, v = u.sort(0).values, v.sort(0).values
    n, m = u.shape[0], v.shape[0]
    if n == m:
        return (u - v).abs().pow(p).mean(0)
    kw = {"device": u.device, "dtype": torch.float64}
    levels = torch.cat([torch.arange(1, n + 1, **kw) / n, torch.arange(1, m + 1, **kw) / m]).sort().values
    lower = torch.cat([levels.new_zeros(1), levels[:-1]])
    mid = (lower + levels) / 2
    iu = (mid * n).long().clamp_max(n - 1)
    iv = (mid * m).long().clamp_max(m - 1)
    width = (levels - lower).to(u.dtype)
    return width @ (u[iu] - v[iv]).abs().pow(p)


def wasserstein(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    p: float = 2,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    manifold: Manifold | None = None,
    num_iter_max: int = 1_000_000,
) -> torch.Tensor:
    """Exact W_p = (min_G <G, d^p>)^(1/p) between the empirical measures of x and y (weights a: (N,), b: (M,),
    normalised; uniform by default). d is Euclidean on flattened events or geodesic on `manifold`. Unweighted
    1-D samples use the exact sorted-quantile formula instead of a network-simplex solve."""
    x, y = _samples(x, y)
    p = _check_p(p)
    if a is None and b is None and manifold is None and x[0].numel() == 1:
        return _quantile_cost(x.reshape(-1, 1), y.reshape(-1, 1), p)[0].pow(1 / p)
    M = _ground_cost(x, y, p, manifold)
    wa, wb = _weights(a, x.shape[0], M, "a"), _weights(b, y.shape[0], M, "b")
    import ot  # POT imports scikit-learn (about 4 s): only where it solves

    return ot.emd2(wa, wb, M, numItermax=num_iter_max).pow(1 / p)


def sinkhorn_distance(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    reg: float,
    p: float = 2,
    a: torch.Tensor | None = None,
    b: torch.Tensor | None = None,
    manifold: Manifold | None = None,
    method: str = "sinkhorn",
    num_iter_max: int = 1000,
) -> torch.Tensor:
    """Entropic OT: (<G_reg, d^p>)^(1/p) with G_reg the Sinkhorn plan at regularisation `reg` (in units of d^p),
    the transport cost without the entropy term. `method`: POT's "sinkhorn" or, for small reg, "sinkhorn_log"."""
    x, y = _samples(x, y)
    p = _check_p(p)
    if not (isinstance(reg, int | float) and math.isfinite(reg) and reg > 0):
        raise ValueError(f"reg: expected a positive regularisation, got {reg!r}")
    check_choice(method, ("sinkhorn", "sinkhorn_log", "sinkhorn_stabilized"), "method")
    M = _ground_cost(x, y, p, manifold)
    wa, wb = _weights(a, x.shape[0], M, "a"), _weights(b, y.shape[0], M, "b")
    import ot

    return ot.sinkhorn2(wa, wb, M, reg, method=method, numItermax=num_iter_max).pow(1 / p)


def _batched_points(v: torch.Tensor, mask: torch.Tensor | None, name: str) -> torch.Tensor:
    check_tensor(v, name, min_dim=3, finite=False)
    if v.dim() != 3:
        raise ValueError(f"{name}: expected a batch of point sets (B, N, D), got shape {tuple(v.shape)}")
    if mask is None:
        mask = torch.ones(v.shape[:2], dtype=torch.bool, device=v.device)
    elif not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != v.shape[:2]:
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"{name}_mask: expected a bool tensor of shape {tuple(v.shape[:2])}, got {shape}")
    if not bool(torch.isfinite(v[mask]).all()):
        raise ValueError(f"{name}: contains NaN or inf at unmasked points")
    return mask


def sinkhorn_distance_batched(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    reg: float,
    p: float = 2,
    x_mask: torch.Tensor | None = None,
    y_mask: torch.Tensor | None = None,
    num_iter: int = 100,
) -> torch.Tensor:
    """`sinkhorn_distance` for B independent pairs of point sets at once (uniform weights on the unmasked points).

    x: (B, N, D), y: (B, M, D), masks (B, N) / (B, M) bool (True = a point; padding is ignored) -> (B,) values
    (<G_reg, d^p>)^(1/p); NaN where either set is empty. Log-domain Sinkhorn iterations exactly as POT's
    "sinkhorn_log" (v then u, `num_iter` of them, no early stop), in one batched tensor program.
    """
    xm, ym = _batched_points(x, x_mask, "x"), _batched_points(y, y_mask, "y")
    if x.shape[0] != y.shape[0] or x.shape[2] != y.shape[2]:
        raise ValueError(f"x, y: expected (B, N, D) and (B, M, D), got {tuple(x.shape)} and {tuple(y.shape)}")
    p = _check_p(p)
    if not (isinstance(reg, int | float) and math.isfinite(reg) and reg > 0):
        raise ValueError(f"reg: expected a positive regularisation, got {reg!r}")
    if not isinstance(num_iter, int) or num_iter < 1:
        raise ValueError(f"num_iter: expected a positive integer, got {num_iter!r}")
    x0, y0 = x.masked_fill(~xm[..., None], 0), y.masked_fill(~ym[..., None], 0)
    sq = (x0[:, :, None, :] - y0[:, None, :, :]).pow(2).sum(-1)
    M = sq if p == 2 else sq.clamp_min(torch.finfo(sq.dtype).tiny).pow(p / 2)
    pair = xm[:, :, None] & ym[:, None, :]
    neg_inf = torch.tensor(-math.inf, dtype=M.dtype, device=M.device)
    Mr = torch.where(pair, -M / reg, neg_inf)
    log_a = torch.where(xm, -torch.log(xm.sum(1, keepdim=True).to(M.dtype)), neg_inf)
    log_b = torch.where(ym, -torch.log(ym.sum(1, keepdim=True).to(M.dtype)), neg_inf)
    u, v = torch.zeros_like(log_a), torch.zeros_like(log_b)

    def finite(z: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return torch.where(valid, z, torch.zeros_like(z))

    for _ in range(num_iter):
        v = finite(log_b - torch.logsumexp(Mr + u[:, :, None], dim=1), ym)
        u = finite(log_a - torch.logsumexp(Mr + v[:, None, :], dim=2), xm)
    G = torch.exp(Mr + u[:, :, None] + v[:, None, :])
    cost = (G * torch.where(pair, M, torch.zeros_like(M))).sum((1, 2))
    empty = ~(xm.any(1) & ym.any(1))
    return torch.where(empty, torch.full_like(cost, math.nan), cost).pow(1 / p)


def sliced_wasserstein(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    num_projections: int = 256,
    p: float = 2,
    generator: torch.Generator | None = None,
    projections: torch.Tensor | None = None,
) -> torch.Tensor:
    """SW_p = (mean over directions theta of W_p^p(theta.x, theta.y))^(1/p), directions uniform on the sphere.

    x: (N, ...), y: (M, ...); `projections` (D, L) unit columns override the `num_projections` directions
    drawn with `generator` (on x's device). Same definition as POT's `ot.sliced_wasserstein_distance`.
    """
    x, y = _samples(x, y)
    p = _check_p(p)
    x, y = x.flatten(1), y.flatten(1)
    if projections is None:
        if not isinstance(num_projections, int) or num_projections < 1:
            raise ValueError(f"num_projections: expected a positive integer, got {num_projections!r}")
        theta = randn((x.shape[1], num_projections), generator=generator, device=x.device, dtype=x.dtype)
        theta = theta / theta.norm(dim=0, keepdim=True)
    else:
        check_tensor(projections, "projections", min_dim=2)
        if projections.dim() != 2 or projections.shape[0] != x.shape[1]:
            raise ValueError(f"projections: expected shape ({x.shape[1]}, L), got {tuple(projections.shape)}")
        theta = projections.to(x.dtype)
    return _quantile_cost(x @ theta, y @ theta, p).mean().pow(1 / p)
