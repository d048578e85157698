"""Gaussian behaviour cloning, the policies that average modes: a diagonal Gaussian over the joint action given the
joint state (`inputs="joint"`, centralised), or a shared per-agent Gaussian on the agent's own row [o_i, onehot(i)]
(`inputs="own"`, independent BC). Trained by Gaussian negative log-likelihood; acts with the mean, clipped to
[-1, 1]."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from flowlab.core.nets import MLP
from flowlab.rl_control.mac_flow.agents import MARLAgent, Stage, joint_state, with_agent_ids

__all__ = ["GaussianBC"]

_LOG_STD = (-5.0, 2.0)


class _NLL(nn.Module):
    def __init__(self, agent: GaussianBC) -> None:
        super().__init__()
        self.agent = agent

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator):
        mean, log_std = self.agent.distribution(batch["obs"])
        z = (batch["actions"] - mean) * torch.exp(-log_std)
        nll = (0.5 * z.square() + log_std + 0.5 * math.log(2 * math.pi)).sum(-1).mean()
        return nll, {}


class GaussianBC(MARLAgent):
    """See the module docstring. One network call per joint action."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_agents: int,
        hidden: Sequence[int] = (128, 128),
        *,
        inputs: Literal["joint", "own"] = "joint",
        lr: float = 3e-4,
    ) -> None:
        super().__init__(obs_dim, act_dim, n_agents)
        if inputs not in ("joint", "own"):
            raise ValueError(f"inputs: expected 'joint' or 'own', got {inputs!r}")
        self.inputs, self.lr = inputs, lr
        if inputs == "joint":
            self.net = MLP(n_agents * obs_dim, 2 * n_agents * act_dim, hidden, layer_norm=True)
        else:
            self.net = MLP(obs_dim + n_agents, 2 * act_dim, hidden, layer_norm=True)

    def distribution(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's mean and log-std, each (B, N, A), for observations (B, N, O)."""
        b, n, _ = obs.shape
        x = joint_state(obs) if self.inputs == "joint" else with_agent_ids(obs)
        mean, log_std = self.net(x).reshape(b, n, 2, self.act_dim).unbind(2)
        return mean, log_std.clamp(*_LOG_STD)

    def stages(self) -> tuple[Stage, ...]:
        """One stage, "bc": the Gaussian negative log-likelihood at `lr`."""
        return (Stage("bc", _NLL(self), self.lr),)

    @property
    def act_network(self) -> nn.Module:
        """The Gaussian policy network, called once per joint action."""
        return self.net

    def _act(self, obs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.distribution(obs)[0].clamp(-1.0, 1.0)
