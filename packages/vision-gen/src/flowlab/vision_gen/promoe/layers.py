"""The MoE block MLPs, each a core `ContextMLP` (x: (B, N, dim) and the block's `TokenContext` -> `MLPOutput`):

- `ProMoEMLP`: a shared expert on every token plus one routed expert chosen by `PrototypeRouter` (null-label
  tokens to the unconditional expert), with the routing contrastive loss;
- `TokenChoiceMoE`: a shared expert plus the top-1 expert of a linear softmax router, with a load-balancing loss;
- `ExpertChoiceMoE`: a shared expert plus experts that each pick their top-C tokens of the batch;
- `DiffMoELite`: expert choice in training, and a capacity predictor that sets each expert's load at inference.

Widths: with the dense MLP's hidden width H, the shared expert and every routed expert have H / 2, so a token's
activated matmul FLOPs (shared + one expert; on average for expert choice) equal the dense MLP's, 4 dim H per
token; the router adds 2 dim E (ProMoE without its shared expert gives each expert the whole H instead). Each layer
reports `stats`: `dispatch` (B, N, E) bool, which of the bank's experts processed each token, `tokens_per_expert`
(E,) and `routed` (E,) bool, the experts a router chooses (False: the unconditional expert).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from flowlab.core.nets.dit import ContextMLP, MLPOutput, TokenContext, dense_mlp
from flowlab.vision_gen.promoe.experts import ExpertBank, dispatch_top1, positive_int
from flowlab.vision_gen.promoe.losses import load_balancing_loss, routing_contrastive_loss
from flowlab.vision_gen.promoe.routing import LinearRouter, PrototypeRouter

__all__ = ["DiffMoELite", "ExpertChoiceMoE", "ProMoEMLP", "TokenChoiceMoE"]


def _flat(x: torch.Tensor, width: int) -> torch.Tensor:
    if x.dim() != 3 or x.shape[-1] != width:
        raise ValueError(f"x: expected shape (B, N, {width}), got {tuple(x.shape)}")
    return x.reshape(-1, width)


def _stats(expert: torch.Tensor, shape: torch.Size, routed: torch.Tensor) -> dict[str, torch.Tensor]:
    """The routing statistics of a top-1 layer: expert (T,) -> dispatch (B, N, E), tokens per expert, routed."""
    dispatch = nn.functional.one_hot(expert, routed.shape[0]).bool().reshape(*shape[:2], -1)
    return {"dispatch": dispatch, "tokens_per_expert": dispatch.flatten(0, 1).sum(0), "routed": routed}


class ProMoEMLP(ContextMLP):
    """ProMoE's MLP: shared(x) + g * E_{j*}(x). `num_routed` prototype experts of width `hidden` plus (with
    `conditional`) one unconditional expert that takes every null-label token, and (with `shared`) a shared expert
    of width `hidden`. The routing contrastive loss over the prototype-routed tokens is returned as `rcl` (times
    `rcl_weight`; absent when it is 0). `activation` is the router's (identity, softmax, sigmoid);
    `learn_prototypes=False` freezes its prototypes (the k-means-routing ablation)."""

    def __init__(
        self,
        dim: int,
        hidden: int,
        *,
        num_routed: int,
        activation: str = "identity",
        conditional: bool = True,
        shared: bool = True,
        learn_prototypes: bool = True,
        rcl_weight: float = 1.0,
        rcl_tau: float = 0.07,
    ) -> None:
        super().__init__()
        if not (isinstance(rcl_weight, int | float) and rcl_weight >= 0):
            raise ValueError(f"rcl_weight: expected a number >= 0, got {rcl_weight!r}")
        self.dim = positive_int(dim, "dim")
        self.router = PrototypeRouter(dim, num_routed, activation=activation, conditional=conditional,
                                      learnable=learn_prototypes)  # fmt: skip
        self.experts = ExpertBank(num_routed + int(conditional), dim, hidden)
        self.shared = dense_mlp(dim, hidden) if shared else None
        self.rcl_weight, self.rcl_tau = float(rcl_weight), float(rcl_tau)
        self.register_buffer("routed", torch.arange(self.experts.num_experts) < num_routed, persistent=False)

    def forward(self, x: torch.Tensor, *, context: TokenContext) -> MLPOutput:
        """x: (B, N, dim) -> `MLPOutput`; context.labels (B,) and context.null_label are required."""
        if context.labels is None or context.null_label is None:
            raise ValueError("context: ProMoE routes on class labels; build the DiT with num_classes > 0")
        flat = _flat(x, self.dim)
        is_null = (context.labels == context.null_label)[:, None].expand(x.shape[:2]).reshape(-1)
        decision = self.router(flat, is_null)
        out = dispatch_top1(self.experts, flat, decision.expert, decision.gate)
        if self.shared is not None:
            out = out + self.shared(flat)
        aux = {}
        if self.rcl_weight:
            assignments = decision.expert.masked_fill(is_null, -1) if self.router.conditional else decision.expert
            rcl = routing_contrastive_loss(flat, assignments, self.router.prototypes, tau=self.rcl_tau)
            aux["rcl"] = self.rcl_weight * rcl
        return MLPOutput(out.reshape(x.shape), aux, _stats(decision.expert, x.shape, self.routed))


class TokenChoiceMoE(ContextMLP):
    """The token-choice baseline: shared(x) + p_{j*} E_{j*}(x) with j* the top-1 of a linear softmax router over
    `num_experts` experts of width `hidden` (and a shared expert of width `hidden`), the Switch load-balancing
    loss as `load_balance` (times `lb_weight`; absent when it is 0). Labels play no part."""

    def __init__(self, dim: int, hidden: int, *, num_experts: int, lb_weight: float = 0.01) -> None:
        super().__init__()
        if not (isinstance(lb_weight, int | float) and lb_weight >= 0):
            raise ValueError(f"lb_weight: expected a number >= 0, got {lb_weight!r}")
        self.dim = positive_int(dim, "dim")
        self.router = LinearRouter(dim, num_experts)
        self.experts = ExpertBank(num_experts, dim, hidden)
        self.shared = dense_mlp(dim, hidden)
        self.lb_weight = float(lb_weight)
        self.register_buffer("routed", torch.ones(num_experts, dtype=torch.bool), persistent=False)

    def forward(self, x: torch.Tensor, *, context: TokenContext) -> MLPOutput:
        """x: (B, N, dim) -> `MLPOutput`."""
        flat = _flat(x, self.dim)
        decision = self.router(flat)
        out = self.shared(flat) + dispatch_top1(self.experts, flat, decision.expert, decision.gate)
        aux = {}
        if self.lb_weight:
            aux["load_balance"] = self.lb_weight * load_balancing_loss(decision.scores, decision.expert)
        return MLPOutput(out.reshape(x.shape), aux, _stats(decision.expert, x.shape, self.routed))


class ExpertChoiceMoE(ContextMLP):
    """The expert-choice baseline (Zhou et al. 2022): router probabilities s = softmax(x W) over `num_experts`;
    each expert takes the C = ceil(capacity_factor T / E) tokens of the whole batch (T = B N) with its highest
    score and weights its output by that score; plus a shared expert of width `hidden`. A token may be taken by
    several experts or by none (then only the shared expert sees it)."""

    def __init__(self, dim: int, hidden: int, *, num_experts: int, capacity_factor: float = 1.0) -> None:
        super().__init__()
        if not (isinstance(capacity_factor, int | float) and capacity_factor > 0):
            raise ValueError(f"capacity_factor: expected a positive number, got {capacity_factor!r}")
        self.dim = positive_int(dim, "dim")
        self.router = LinearRouter(dim, num_experts)
        self.experts = ExpertBank(num_experts, dim, hidden)
        self.shared = dense_mlp(dim, hidden)
        self.capacity_factor = float(capacity_factor)
        self.register_buffer("routed", torch.ones(num_experts, dtype=torch.bool), persistent=False)

    def capacity(self, tokens: int) -> int:
        """How many of a batch's `tokens` each expert takes: ceil(capacity_factor tokens / E), at most all."""
        return min(tokens, math.ceil(self.capacity_factor * tokens / self.experts.num_experts))

    def forward(self, x: torch.Tensor, *, context: TokenContext) -> MLPOutput:
        """x: (B, N, dim) -> `MLPOutput`."""
        flat = _flat(x, self.dim)
        t, e = flat.shape[0], self.experts.num_experts
        scores = self.router(flat).scores  # (T, E)
        capacity = self.capacity(t)
        gate, index = scores.T.topk(capacity, dim=-1)  # (E, C) each
        picked = self.experts(flat[index]) * gate[..., None].to(flat.dtype)
        out = self.shared(flat).index_add(0, index.reshape(-1), picked.reshape(-1, self.dim))
        dispatch = torch.zeros(e, t, dtype=torch.bool, device=x.device).scatter(1, index, True).T
        stats = {"dispatch": dispatch.reshape(*x.shape[:2], e), "tokens_per_expert": dispatch.sum(0),
                 "routed": self.routed}  # fmt: skip
        return MLPOutput(out.reshape(x.shape), {}, stats)


class DiffMoELite(ExpertChoiceMoE):
    """DiffMoE-lite (Shi et al. 2025, as in the official ProMoE repository's DiffMoE, simplified): expert choice
    over the batch-level global token pool (`ExpertChoiceMoE`), plus a capacity predictor, an MLP dim -> dim -> E
    (SiLU) on the detached tokens trained by binary cross-entropy (returned as `capacity`) on which experts picked
    each token. Each training call moves expert j's threshold, an EMA (decay `threshold_decay`) of the C-th largest
    predicted probability of the batch (from 0, as in the official code). In eval mode expert j takes k_j tokens, k_j
    the number whose predicted probability exceeds its threshold, choosing them by router score: the compute follows
    the predictor instead of a fixed capacity. Simplified: no capacity schedule. The thresholds are a buffer, so a
    model that ends holding EMA weights compares its averaged predictor with the live predictor's quantiles (close
    once the learning rate has decayed). The inference dispatch reads its number of (token, expert) pairs back from
    the device."""

    def __init__(
        self, dim: int, hidden: int, *, num_experts: int, capacity_factor: float = 1.0, threshold_decay: float = 0.95
    ) -> None:
        super().__init__(dim, hidden, num_experts=num_experts, capacity_factor=capacity_factor)
        if not (isinstance(threshold_decay, int | float) and 0 <= threshold_decay < 1):
            raise ValueError(f"threshold_decay: expected a number in [0, 1), got {threshold_decay!r}")
        self.threshold_decay = float(threshold_decay)
        self.predictor = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, num_experts))
        self.register_buffer("threshold", torch.zeros(num_experts))

    def forward(self, x: torch.Tensor, *, context: TokenContext) -> MLPOutput:
        """x: (B, N, dim) -> `MLPOutput`; training mode: expert choice, the predictor's loss and the thresholds'
        update; eval mode: the predicted capacities."""
        flat = _flat(x, self.dim)
        logits = self.predictor(flat.detach()).float()  # (T, E)
        if self.training:
            out = super().forward(x, context=context)
            picked = out.stats["dispatch"].reshape(logits.shape).float()
            with torch.no_grad():
                quantile = logits.sigmoid().topk(self.capacity(flat.shape[0]), dim=0).values[-1]  # (E,)
                self.threshold.lerp_(quantile.to(self.threshold.dtype), 1 - self.threshold_decay)
            return MLPOutput(out.out, {"capacity": F.binary_cross_entropy_with_logits(logits, picked)}, out.stats)
        t, e = flat.shape[0], self.experts.num_experts
        scores = self.router(flat).scores  # (T, E)
        k = (logits.sigmoid() > self.threshold).sum(0)  # (E,) the predicted capacity of each expert
        expert, rank = (torch.arange(t, device=x.device)[None] < k[:, None]).nonzero(as_tuple=True)
        token = scores.T.argsort(dim=-1, descending=True)[expert, rank]
        out = self.shared(flat).index_add(
            0, token, dispatch_top1(self.experts, flat[token], expert, scores[token, expert])
        )
        dispatch = torch.zeros(t, e, dtype=torch.bool, device=x.device)
        dispatch[token, expert] = True
        stats = {"dispatch": dispatch.reshape(*x.shape[:2], e), "tokens_per_expert": k, "routed": self.routed}
        return MLPOutput(out.reshape(x.shape), {}, stats)
