"""The factorised (IGM) critic: per-agent values Q_i(o_i, a_i) from one shared network on [o_i, onehot(i), a_i], an
ensemble of them, and a mixer into the team value Q_tot: the mean (MAC-Flow's continuous default), the VDN sum, or a
QMIX hypernetwork mixer, monotone in every Q_i. A Polyak-averaged target copy is kept (`update_target`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from flowlab.core.nets import MLP
from flowlab.rl_control.mac_flow.agents import joint_state, with_agent_ids
from flowlab.rl_control.networks import TargetNetwork

__all__ = ["MIXERS", "FactorisedCritic", "QMixer"]

MIXERS = ("mean", "vdn", "qmix")


class QMixer(nn.Module):
    """QMIX: Q_tot = w_2(s) . elu(W_1(s)^T q + b_1(s)) + b_2(s) with |.| on the hypernetworks' weights, so
    dQ_tot / dQ_i >= 0. q: (B, N), state: (B, S) -> (B,)."""

    def __init__(self, n_agents: int, state_dim: int, embed_dim: int = 32) -> None:
        super().__init__()
        self.n_agents, self.embed_dim = n_agents, embed_dim
        self.w1 = nn.Linear(state_dim, n_agents * embed_dim)
        self.b1 = nn.Linear(state_dim, embed_dim)
        self.w2 = nn.Linear(state_dim, embed_dim)
        self.b2 = MLP(state_dim, 1, (embed_dim,), act="relu")

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """q: (B, N) per-agent values, state: (B, S) -> Q_tot: (B,), monotone in each agent's value."""
        w1 = self.w1(state).abs().reshape(-1, self.n_agents, self.embed_dim)
        hidden = F.elu(torch.einsum("bn,bne->be", q, w1) + self.b1(state))
        return (hidden * self.w2(state).abs()).sum(-1) + self.b2(state)[:, 0]


class FactorisedCritic(TargetNetwork):
    """`ensemble` copies of a shared per-agent Q network (LayerNorm MLP) with a mixer (one per copy for QMIX).
    `agent_values(obs, act)`: (K, B, N); `q_tot(obs, act)`: (K, B); observations (B, N, O), actions (B, N, A)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_agents: int,
        hidden: Sequence[int] = (128, 128),
        *,
        mixer: Literal["mean", "vdn", "qmix"] = "mean",
        ensemble: int = 2,
    ) -> None:
        if mixer not in MIXERS:
            raise ValueError(f"mixer: expected one of {MIXERS}, got {mixer!r}")
        if isinstance(ensemble, bool) or not isinstance(ensemble, int) or ensemble < 1:
            raise ValueError(f"ensemble: expected a positive int, got {ensemble!r}")
        nets = nn.ModuleList(MLP(obs_dim + n_agents + act_dim, 1, hidden, layer_norm=True) for _ in range(ensemble))
        mixers = nn.ModuleList(QMixer(n_agents, n_agents * obs_dim) for _ in range(ensemble if mixer == "qmix" else 0))
        super().__init__(nn.ModuleDict({"q": nets, "mixers": mixers}))
        self.mixer = mixer

    def agent_values(self, obs: torch.Tensor, act: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """Q_i(o_i, a_i) of every copy: (K, B, N)."""
        x = torch.cat([with_agent_ids(obs), act], -1)
        return torch.stack([net(x)[..., 0] for net in self.pick(target)["q"]])

    def mix(self, q: torch.Tensor, obs: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """Q_tot from per-agent values q (K, B, N): (K, B)."""
        if self.mixer == "mean":
            return q.mean(-1)
        if self.mixer == "vdn":
            return q.sum(-1)
        state = joint_state(obs)
        return torch.stack([m(qk, state) for m, qk in zip(self.pick(target)["mixers"], q, strict=True)])

    def q_tot(self, obs: torch.Tensor, act: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """The team value of every copy: (K, B)."""
        return self.mix(self.agent_values(obs, act, target=target), obs, target=target)
