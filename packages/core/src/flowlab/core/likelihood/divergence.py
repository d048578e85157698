"""Divergence of a vector field: exact (one reverse pass per dimension) and Hutchinson's estimator, Euclidean or
Riemannian (embedded sphere, flat torus, Poincare ball and their products).

Both estimators get the field value and the divergence from one field evaluation: `torch.func.vjp` runs the field
once and its pullback is vectorised (`torch.func.vmap`) over the basis vectors or probes, so no `create_graph` is
needed and gradients still reach the field's parameters and the inputs when the caller records them. Reverse mode
is used rather than `torch.func.jvp` because it is the cheaper of the two on CPU (forward-mode linear layers also
multiply by the parameters' zero tangents); the estimators are the same.

On a manifold the field is first projected onto the tangent space (u = P_x v, what the manifold solvers integrate),
and the divergence is the Riemannian one: tr(P J_u) for the sphere embedded in R^(d+1) (P = I - x x^T, the probe or
basis vector projected by P), the plain trace on the flat torus, and div v + d <v, grad log lambda_x> with
lambda_x = 2 / (1 - c ||x||^2) on the Poincare ball (the volume density is lambda_x^d).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.func import vjp, vmap

from flowlab.core.distributions import Generators, randn
from flowlab.core.manifolds import Euclidean, FlatTorus, Manifold, PoincareBall, Product, Sphere
from flowlab.core.validation import check_choice, check_tensor, check_time

__all__ = [
    "AUTO_EXACT_MAX_DIM",
    "EXACT_MAX_DIM",
    "PROBES",
    "divergence_exact",
    "divergence_hutchinson",
    "sample_probes",
]

#: `divergence_exact` refuses more dimensions than this unless `force=True` (its cost is one pass per dimension)
EXACT_MAX_DIM = 64
#: the likelihood integrators use the exact divergence by default up to this many dimensions, Hutchinson above
AUTO_EXACT_MAX_DIM = 16
PROBES = ("rademacher", "gaussian")

#: (x, v) -> (B,): the term a manifold's volume density adds to the coordinate divergence
Correction = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def sample_probes(
    x: torch.Tensor, num_probes: int = 1, *, probe: str = "rademacher", generator: Generators = None
) -> torch.Tensor:
    """Hutchinson probes with E[eps eps^T] = I on x's device and dtype: x: (B, ...) -> (num_probes, B, ...).

    probe: "rademacher" (entries +-1, the lower-variance choice) or "gaussian". A list of B generators gives sample i
    its probes from generator i alone. Draw them once per trajectory and reuse them at every step.
    """
    check_tensor(x, "x", finite=False)
    check_choice(probe, PROBES, "probe")
    if isinstance(num_probes, bool) or not isinstance(num_probes, int) or num_probes < 1:
        raise ValueError(f"num_probes: expected a positive int, got {num_probes!r}")
    z = randn((x.shape[0], num_probes, *x.shape[1:]), generator=generator, device=x.device, dtype=x.dtype)
    if probe == "rademacher":
        z = torch.where(z >= 0, 1.0, -1.0).to(x.dtype)
    return z.transpose(0, 1)


def divergence_exact(
    field: Callable[..., torch.Tensor],
    x: torch.Tensor,
    t: torch.Tensor,
    *,
    manifold: Manifold | None = None,
    force: bool = False,
    **cond: Any,
) -> torch.Tensor:
    """The exact divergence of `field(x=x, t=t, **cond)` at x: (B, ...), t: (B,) -> (B,).

    D = prod(x.shape[1:]) vectorised reverse passes; D > 64 raises unless `force=True` (use Hutchinson there).
    With `manifold`, the Riemannian divergence of the tangent projection of the field.
    """
    _check_inputs(field, x, t, manifold)
    dim = math.prod(x.shape[1:])
    check_exact_dim(dim, force)
    geometry = riemannian_geometry(manifold)
    return velocity_and_divergence(field, x, t, basis_vectors(x), exact=True, geometry=geometry, cond=cond)[1]


def divergence_hutchinson(
    field: Callable[..., torch.Tensor],
    x: torch.Tensor,
    t: torch.Tensor,
    eps: torch.Tensor,
    *,
    manifold: Manifold | None = None,
    **cond: Any,
) -> torch.Tensor:
    """Hutchinson's unbiased estimate E[eps^T J eps] of the divergence at x: (B, ...), t: (B,) -> (B,).

    eps: (B, ...) one probe per sample, or (P, B, ...) P probes averaged (see `sample_probes`); probes need
    E[eps eps^T] = I. With `manifold`, probes are projected onto the tangent space and the Riemannian terms added.
    """
    _check_inputs(field, x, t, manifold)
    check_tensor(eps, "eps")
    if eps.shape == x.shape:
        eps = eps.unsqueeze(0)
    if eps.dim() != x.dim() + 1 or eps.shape[1:] != x.shape:
        raise ValueError(f"eps: expected shape {tuple(x.shape)} or (P, *{tuple(x.shape)}), got {tuple(eps.shape)}")
    geometry = riemannian_geometry(manifold)
    return velocity_and_divergence(field, x, t, eps, exact=False, geometry=geometry, cond=cond)[1]


def velocity_and_divergence(
    field: Callable[..., torch.Tensor],
    x: torch.Tensor,
    t: torch.Tensor,
    directions: torch.Tensor,
    *,
    exact: bool,
    geometry: tuple[Manifold, Correction | None] | None,
    cond: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor]:
    """One field evaluation at x: (B, ...) giving (v: (B, ...), div: (B,)).

    directions: (K, B, ...), the D basis vectors (`exact=True`: the K quadratic terms are summed, the trace) or K
    Hutchinson probes (`exact=False`: the K estimates are averaged).
    """
    manifold, correction = geometry if geometry is not None else (None, None)

    def fn(y: torch.Tensor) -> torch.Tensor:
        v = field(x=y, t=t, **cond)
        return v if manifold is None else manifold.proju(y, v)

    v, pullback = vjp(fn, x)
    if manifold is not None:
        directions = vmap(lambda e: manifold.proju(x, e))(directions)
    if directions.shape[0] == 1:
        rows = pullback(directions[0])[0].unsqueeze(0)
    else:
        rows = vmap(pullback)(directions)[0]
    quad = (rows * directions).flatten(2).sum(-1)  # (K, B)
    div = quad.sum(0) if exact else quad.mean(0)
    if correction is not None:
        div = div + correction(x, v)
    return v, div


def basis_vectors(x: torch.Tensor) -> torch.Tensor:
    """The D standard basis vectors of x's event space, broadcast over the batch: (D, B, ...) with batch stride 0."""
    dim = math.prod(x.shape[1:])
    eye = torch.eye(dim, device=x.device, dtype=x.dtype).reshape(dim, 1, *x.shape[1:])
    return eye.expand(dim, *x.shape)


def check_exact_dim(dim: int, force: bool) -> None:
    if dim > EXACT_MAX_DIM and not force:
        raise ValueError(
            f"divergence: the exact divergence costs one pass per dimension and D={dim} > {EXACT_MAX_DIM}; "
            "use divergence='hutchinson' or pass force=True"
        )


def riemannian_geometry(manifold: Manifold | None) -> tuple[Manifold, Correction | None] | None:
    """None for flat space (no manifold); else the manifold and its volume-density correction (None if zero)."""
    if manifold is None:
        return None
    if not isinstance(manifold, Manifold):
        raise ValueError(f"manifold: expected a flowlab.core.manifolds Manifold, got {type(manifold).__name__}")
    return manifold, _correction(manifold)


def _correction(manifold: Manifold) -> Correction | None:
    if isinstance(manifold, (Euclidean, FlatTorus, Sphere)):
        return None
    if isinstance(manifold, PoincareBall):
        d, c = manifold.dim, manifold.c

        def conformal(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            # d <v, grad log lambda_x>, grad log lambda_x = 2 c x / (1 - c ||x||^2) = c lambda_x x
            return d * c * manifold.lambda_x(x).squeeze(-1) * (x * v).sum(-1)

        return conformal
    if isinstance(manifold, Product):
        parts = [_correction(m) for m in manifold.factors]
        if all(p is None for p in parts):
            return None
        sizes = [m.ambient_dim for m in manifold.factors]

        def summed(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            pairs = zip(parts, x.split(sizes, -1), v.split(sizes, -1), strict=True)
            return sum(p(a, b) for p, a, b in pairs if p is not None)

        return summed
    raise ValueError(
        f"manifold: the Riemannian divergence is implemented for Euclidean, FlatTorus, Sphere, PoincareBall and "
        f"their Products, got {manifold!r}"
    )


def _check_inputs(field: Callable[..., torch.Tensor], x: torch.Tensor, t: torch.Tensor, manifold) -> None:
    if not callable(field):
        raise ValueError(f"field: expected a callable field(x=..., t=...), got {type(field).__name__}")
    check_tensor(x, "x", min_dim=2)
    if manifold is not None:
        riemannian_geometry(manifold)  # an unsupported manifold is named before its points are checked
        manifold.check_point(x, "x")
    check_time(t, x.shape[0])
