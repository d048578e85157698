"""The GFM network and flow map: X_{s,t}(x) = exp_x((t − s) proj_x f_θ(s, t, x)), so X_{s,s} = Id exactly.

f_θ is the core's two-time `ManifoldMLP` (times=2) with the input embedding of §3 of the spec: S² and the Poincaré
disk as ambient coordinates, T^d as (cos θ_i, sin θ_i) per angle (`FlatTorus.input_features`, continuous across
the wrap seam).
"""

from __future__ import annotations

from collections.abc import Sequence

from flowlab.core.flowmaps import ParametrisedFlowMap
from flowlab.core.manifolds.base import Manifold
from flowlab.core.nets import ManifoldMLP

__all__ = ["build_flow_map"]


def build_flow_map(
    manifold: Manifold,
    *,
    hidden: Sequence[int] = (256,) * 4,
    time_embed_dim: int = 32,
    time_scale: float = 100.0,
    act: str = "silu",
    fourier_dim: int = 0,
    fourier_scale: float = 1.0,
) -> ParametrisedFlowMap:
    """The GFM (and RFM baseline) model: `ParametrisedFlowMap(ManifoldMLP(manifold, times=2, ...), manifold=manifold)`.

    Call it as X(x=x, s=s, t=t); `velocity(x=, s=, t=)` is v_{s,t} and `.diagonal_field` the implicit flow
    v_{t,t} used by the RFM loss, Euler sampling and the likelihood. `fourier_dim` / `fourier_scale`: random
    Fourier features of the input embedding (`ManifoldMLP`; 0: none).
    """
    net = ManifoldMLP(
        manifold, times=2, hidden=tuple(hidden), time_embed_dim=time_embed_dim, time_scale=time_scale, act=act,
        fourier_dim=fourier_dim, fourier_scale=fourier_scale,
    )  # fmt: skip
    return ParametrisedFlowMap(net, manifold=manifold)
