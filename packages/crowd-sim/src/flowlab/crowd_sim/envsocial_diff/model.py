"""EnvSocial-Diff's denoiser: epsilon-prediction of the (scaled, ego-frame) residual acceleration given the history,
the individual-group interaction graph and the environment.

    c = [F_hist, F_social, F_env, F_light]
    F_hist   = Linear(LSTM(history)[-1])
    F_social = 3 EGNN layers (core `EGNNLayer`, invariant messages on the edge features r_ij, sim1, sim2) over the
               visible-neighbour graph, started from an MLP of [F_hist, node features incl. sim3]
    F_env    = cross-attention from a pedestrian query to box tokens; key/value = MLP(geometry) + embedding of the
               annotation category (a learned stand-in for the paper's BERT text features), logit bias = MLP(closest
               point, distance) (the relative-position bias); obstacles and objects of interest share the encoder, told
               apart by a flag in the geometry
    F_light  = masked mean of MLP(relative position, brightness) over the brightest cells in view
    eps      = TimeMLP(x = noisy residual, t, cond = c)

Pretrained encoders can replace the learned category embedding: `EnvEncoder.category` is any module mapping category
indices (N, K) to (N, K, D) features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.nets import MLP, EGNNLayer, TimeMLP
from flowlab.crowd_sim.envsocial_diff.features import EDGE_DIM, ENV_DIM, LIGHT_DIM, NODE_DIM, FeatureConfig, StepInputs
from flowlab.crowd_sim.envsocial_diff.names import ABLATIONS

__all__ = ["ABLATIONS", "SIZES", "EnvSocialConfig", "EnvSocialDenoiser"]


@dataclass(frozen=True)
class EnvSocialConfig(Config):
    """Widths, diffusion steps and which branches are on (see `ABLATIONS`). `categories`: the annotation
    vocabulary (index 0 = unknown); `features`: the neighbourhoods of the inputs; `goal`, `goal_lookahead` (s),
    `goal_every` (frames): the goal model of training and forecasting (`goals`)."""

    hist_hidden: int = 128
    hist_dim: int = 64
    social_hidden: int = 256
    social_layers: int = 3
    env_dim: int = 64
    light_dim: int = 32
    head_hidden: tuple[int, ...] = (256, 256, 256)
    dropout: float = 0.0
    steps: int = 70
    beta_start: float = 1e-4
    beta_end: float = 0.02
    obstacles: bool = True
    interests: bool = True
    lighting: bool = True
    similarity: bool = True
    categories: tuple[str, ...] = ("<unknown>",)
    features: FeatureConfig = field(default_factory=FeatureConfig)
    goal: Literal["recorded", "constant_velocity"] = "recorded"
    goal_lookahead: float = 8.0
    goal_every: int = 12

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.goal_lookahead > 0 and self.goal_every >= 1):
            raise ValueError(f"goal_lookahead, goal_every: expected > 0 s and >= 1 frame, got {self.goal_lookahead}, "
                             f"{self.goal_every}")  # fmt: skip

    def with_ablation(self, name: str, **changes) -> EnvSocialConfig:
        """This configuration with the branches of ablation `name` (see `ABLATIONS`) and the fields in `changes`
        replaced."""
        if name not in ABLATIONS:
            raise ValueError(f"ablation: unknown {name!r}; expected one of {sorted(ABLATIONS)}")
        return replace(self, **ABLATIONS[name], **changes)

    @property
    def environment(self) -> bool:
        """Whether the environment branch is on (obstacles or objects of interest)."""
        return self.obstacles or self.interests


# Network widths and diffusion steps. quick: small widths, K = 20; full: the spec's widths (the config defaults),
# K = 70. The linear betas are scaled so that the K-step chain reaches noise. Branches, categories and features are
# set per scene and ablation (`with_ablation`, `simulator.scene_config`).
SIZES = {
    "quick": EnvSocialConfig(
        hist_hidden=64,
        hist_dim=32,
        social_hidden=64,
        env_dim=32,
        light_dim=16,
        head_hidden=(128, 128),
        steps=20,
        beta_start=1e-3,
        beta_end=0.35,
    ),
    "full": EnvSocialConfig(steps=70, beta_start=1e-4, beta_end=0.1, dropout=0.1),
}


class EnvEncoder(nn.Module):
    """Cross-attention from pedestrians to environment tokens with a learned relative-position bias."""

    def __init__(self, query_dim: int, dim: int, categories: int) -> None:
        super().__init__()
        self.dim = dim
        self.query = nn.Linear(query_dim, dim)
        self.category = nn.Embedding(categories, dim)
        self.geometry = MLP(ENV_DIM, dim, (dim,))
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.bias = MLP(3, 1, (dim // 2,))
        self.out = nn.Linear(dim, dim)

    def forward(self, query: torch.Tensor, tokens: torch.Tensor, category: torch.Tensor, mask: torch.Tensor):
        """query: (N, Q); tokens: (N, K, ENV_DIM); category: (N, K) long; mask: (N, K) bool -> (N, dim)."""
        if tokens.shape[1] == 0:
            return query.new_zeros(query.shape[0], self.dim)
        emb = self.geometry(tokens) + self.category(category)
        q = self.query(query)[:, None, :]
        logits = (q * self.key(emb)).sum(-1) / math.sqrt(self.dim)
        logits = logits + self.bias(tokens[..., 0:3]).squeeze(-1)  # closest point: direction, log distance
        logits = logits.masked_fill(~mask, -torch.inf)
        any_token = mask.any(dim=1, keepdim=True)
        weights = torch.softmax(torch.where(any_token, logits, torch.zeros_like(logits)), dim=1) * any_token
        return self.out((weights[..., None] * self.value(emb)).sum(1))


class EnvSocialDenoiser(nn.Module):
    """eps_theta(x, t, cond) with `encode(inputs) -> cond`; x: (N, 2) noisy scaled residual, t: (N,) core time."""

    def __init__(self, config: EnvSocialConfig) -> None:
        super().__init__()
        self.config = c = config
        self.lstm = nn.LSTM(6, c.hist_hidden, batch_first=True)
        self.hist_out = nn.Linear(c.hist_hidden, c.hist_dim)
        self.node_in = MLP(c.hist_dim + NODE_DIM, c.social_hidden, (c.social_hidden,))
        self.social = nn.ModuleList(
            EGNNLayer(c.social_hidden, EDGE_DIM, update_coords=False) for _ in range(c.social_layers)
        )
        cond_dim = c.hist_dim + c.social_hidden
        if c.environment:
            self.env = EnvEncoder(c.hist_dim + NODE_DIM, c.env_dim, len(c.categories))
            cond_dim += c.env_dim
        if c.lighting:
            self.light = MLP(LIGHT_DIM, c.light_dim, (c.light_dim,))
            cond_dim += c.light_dim
        self.dropout = nn.Dropout(c.dropout)
        self.cond_dim = cond_dim
        self.head = TimeMLP(2, cond_dim=cond_dim, hidden=c.head_hidden, time_embed_dim=64, zero_out=True)

    def encode(self, inputs: StepInputs) -> torch.Tensor:
        """inputs of N pedestrians -> condition (N, cond_dim). The branches this configuration turns off are masked
        here (similarities zeroed, tokens of unused box kinds dropped), so one set of inputs serves every ablation."""
        c = self.config
        node, edge_attr = inputs.node, inputs.edge_attr
        if not c.similarity:
            node = torch.cat([torch.zeros_like(node[:, :1]), node[:, 1:]], dim=-1)
            edge_attr = torch.cat([edge_attr[:, :5], torch.zeros_like(edge_attr[:, 5:])], dim=-1)
        _, (h, _) = self.lstm(inputs.history)
        hist = self.hist_out(h[-1])
        query = torch.cat([hist, node], dim=-1)
        h = self.node_in(query)
        for layer in self.social:
            h = layer(h, inputs.positions, inputs.edge_index, edge_attr).h
        parts = [hist, h]
        if c.environment:
            is_interest = inputs.env[..., ENV_DIM - 1] > 0.5
            mask = inputs.env_mask & ((is_interest & c.interests) | (~is_interest & c.obstacles))
            parts.append(self.env(query, inputs.env, inputs.env_category, mask))
        if self.config.lighting:
            m = inputs.light_mask[..., None].to(hist.dtype)
            pooled = (self.light(inputs.light) * m).sum(1) / m.sum(1).clamp_min(1)
            parts.append(pooled)
        return self.dropout(torch.cat(parts, dim=-1))

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """x: (N, 2), t: (N,) core times (any float dtype; cast to x's), cond: (N, cond_dim) -> eps: (N, 2)."""
        return self.head(x=x, t=t.to(x.dtype), cond=cond)
