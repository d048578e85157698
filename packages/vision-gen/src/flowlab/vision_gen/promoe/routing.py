"""Routers: ProMoE's two-step router (conditional, then prototypical) and the token-choice baseline's linear router.

A router maps tokens x: (T, dim) to a top-1 `RoutingDecision`: the chosen expert and its gate per token, plus the
scores the auxiliary losses read. Scores are computed in float32 whatever the tokens' dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.validation import check_choice
from flowlab.vision_gen.promoe.experts import positive_int
from flowlab.vision_gen.promoe.names import ACTIVATIONS

__all__ = ["LinearRouter", "PrototypeRouter", "RoutingDecision"]


@dataclass(frozen=True)
class RoutingDecision:
    """expert: (T,) int64 chosen expert; gate: (T,) float32 its weight; scores: (T, E) the activated router scores
    (E the router's experts; an unconditional expert beyond them has none)."""

    expert: torch.Tensor
    gate: torch.Tensor
    scores: torch.Tensor


class PrototypeRouter(nn.Module):
    """ProMoE's router over `num_experts` learnable prototypes p_j: (dim,) (init N(0, 0.02^2)).

    Step 1, conditional routing (`conditional=True`): a token of a null-label sample goes to the unconditional
    expert, index `num_experts`, with gate 1. Step 2, prototypical routing for every other token: Z_ij =
    cos(x_i, p_j), activated by `activation` (identity, the paper's: the raw cosine, possibly negative; softmax over
    experts; sigmoid), top-1 expert j* = argmax_j Z_ij with gate act(Z)_{i j*}, never renormalised. With
    `learnable=False` the prototypes get no gradient (the k-means-routing ablation sets them once, `kmeans.py`)."""

    def __init__(
        self, dim: int, num_experts: int, *, activation: str = "identity", conditional: bool = True,
        learnable: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_experts = positive_int(num_experts, "num_experts")
        self.activation = check_choice(activation, ACTIVATIONS, "activation")
        self.conditional = bool(conditional)
        self.prototypes = nn.Parameter(0.02 * torch.randn(num_experts, positive_int(dim, "dim")),
                                       requires_grad=bool(learnable))  # fmt: skip

    def forward(self, x: torch.Tensor, is_null: torch.Tensor) -> RoutingDecision:
        """x: (T, dim), is_null: (T,) bool (the token's sample carries the null label) -> `RoutingDecision`."""
        cosine = F.normalize(x.float(), dim=-1) @ F.normalize(self.prototypes.float(), dim=-1).T
        if self.activation == "softmax":
            scores = cosine.softmax(-1)
        elif self.activation == "sigmoid":
            scores = cosine.sigmoid()
        else:
            scores = cosine
        gate, expert = scores.max(-1)
        if self.conditional:
            expert = torch.where(is_null, self.num_experts, expert)
            gate = torch.where(is_null, torch.ones_like(gate), gate)
        return RoutingDecision(expert, gate, scores)

    def extra_repr(self) -> str:
        """The router's settings, for the module's repr."""
        return (f"num_experts={self.num_experts}, activation={self.activation}, conditional={self.conditional}, "
                f"learnable={self.prototypes.requires_grad}")  # fmt: skip


class LinearRouter(nn.Module):
    """The token-choice baseline's router (DiT-MoE / Switch): softmax over a bias-free linear map of the token,
    top-1 expert with its probability as gate."""

    def __init__(self, dim: int, num_experts: int) -> None:
        super().__init__()
        self.num_experts = positive_int(num_experts, "num_experts")
        self.weight = nn.Parameter(0.02 * torch.randn(num_experts, positive_int(dim, "dim")))

    def forward(self, x: torch.Tensor) -> RoutingDecision:
        """x: (T, dim) -> `RoutingDecision` with scores the routing probabilities (T, E)."""
        scores = (x.float() @ self.weight.float().T).softmax(-1)
        gate, expert = scores.max(-1)
        return RoutingDecision(expert, gate, scores)
