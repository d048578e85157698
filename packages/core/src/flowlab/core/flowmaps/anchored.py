"""A flow map anchored on a frozen teacher field: X_{s,t}(x) = x + (t − s) v_T(x, s) + (t − s)² g_θ(x, s, t).

The jump is the teacher's Euler step plus a learned second-order correction, so X_{s,s} = Id and the diagonal
v_{t,t} = v_T(x, t) hold by construction: the many-step sampler and the likelihood are the teacher's, and training
only has to learn the correction g_θ that makes long jumps follow the teacher's ODE. On a manifold the move is
exp_x((t − s) proj_x v_T(x, s) + (t − s)² proj_x g_θ(x, s, t)).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from flowlab.core.flowmaps.base import (
    ParametrisedFlowMap,
    check_flow_map_inputs,
    move_by_velocity,
    stack_end_times,
)
from flowlab.core.manifolds.base import Manifold
from flowlab.core.validation import expand_like

__all__ = ["AnchoredFlowMap"]


class AnchoredFlowMap(ParametrisedFlowMap):
    """X_{s,t}(x) = exp_x((t − s) [v_T(x, s) + (t − s) g_θ(x, s, t)]) (x + ... in flat space, `manifold=None`).

    `net(x=x, s=s, t=t, **cond) -> (B, ...)` is the correction g_θ (the only trained part: `parameters()` and the
    state dict hold it alone); `teacher(x=x, t=t, **cond) -> (B, ...)` is the field v_T, never saved with the map.
    It is called plainly, so derivatives in x and t reach it (the likelihood's divergence of v_{t,t} is the
    teacher's): freeze its parameters (`requires_grad_(False)`) so that training's backward passes skip them.
    `velocity` is v_{s,t} = v_T(x, s) + (t − s) g_θ(x, s, t), so `diagonal_field` is the teacher's field exactly.
    """

    def __init__(self, net: nn.Module, teacher: Any, *, manifold: Manifold | None = None) -> None:
        super().__init__(net, manifold=manifold)
        if not callable(teacher):
            raise ValueError(f"teacher: expected a vector field teacher(x=, t=), got {type(teacher).__name__}")
        self._teacher = teacher  # a plain attribute: not a submodule, so neither trained nor saved

    def velocity(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
        """v_{s,t}(x) = v_T(x, s) + (t − s) g_θ(x, s, t): (B, ...), tangent at x on a manifold."""
        check_flow_map_inputs(x, s, t, manifold=self.manifold)
        return self._velocity(x, s, t, self._anchor(x, s, cond), cond)

    def ends(self, *, x: torch.Tensor, s: torch.Tensor, ts: Sequence[torch.Tensor], **cond: Any) -> list[torch.Tensor]:
        """X_{s,t}(x) for every t in `ts` (each (B,)): one teacher call v_T(x, s) shared by all end times and one
        correction call on the stacked rows -> one (B, ...) per end time (the finite-difference ∂_t's three maps)."""
        for t in ts:
            check_flow_map_inputs(x, s, t, manifold=self.manifold)
        k = len(ts)
        anchor = self._anchor(x, s, cond)
        x_k, s_k, t_k, cond_k = stack_end_times(x, s, ts, cond)
        v = self._velocity(x_k, s_k, t_k, torch.cat([anchor] * k), cond_k)
        return list(move_by_velocity(x_k, s_k, t_k, v, self.manifold).chunk(k))

    def _anchor(self, x: torch.Tensor, s: torch.Tensor, cond: dict) -> torch.Tensor:
        anchor = self._teacher(x=x, t=s, **cond)
        if anchor.shape != x.shape:
            raise ValueError(f"teacher: output shape {tuple(anchor.shape)} differs from x's {tuple(x.shape)}")
        return anchor

    def _velocity(self, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, anchor: torch.Tensor, cond: dict):
        correction = self.net(x=x, s=s, t=t, **cond)
        if correction.shape != x.shape:
            raise ValueError(f"net: output shape {tuple(correction.shape)} differs from x's {tuple(x.shape)}")
        v = anchor + expand_like(t - s, x) * correction
        return v if self.manifold is None else self.manifold.proju(x, v)
