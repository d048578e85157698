"""MAC-Flow's stage 1: a behaviour-cloning flow over the agents' actions, on the package's `FlowBCPolicy` (linear
path, 10 clipped Euler steps from N(0, I)).

`mode="joint"` (the paper): one flow over the joint action a = (a_1, ..., a_N) conditioned on the joint state s, so
every coordinated mode of the data is kept. `mode="per_agent"` (the official code): one shared-parameter flow per
agent on [o_i, onehot(i)], whose agents act independently given their observations (it cannot represent joint
modes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import nn

from flowlab.core.distributions import randn
from flowlab.rl_control.mac_flow.agents import check_obs, joint_state, with_agent_ids
from flowlab.rl_control.policies import FlowBCPolicy

__all__ = ["JointFlowBC"]


class JointFlowBC(nn.Module):
    """The behaviour flow of `n_agents` agents (see the module docstring). `loss(obs, actions)` is flow matching on
    (B, N, O) observations and (B, N, A) actions; `sample(obs, noise=)` integrates the joint noise eps (B, N, A)
    (agent i's component eps_i) into actions (B, N, A) in [-1, 1] with `num_flow_steps` network calls."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_agents: int,
        hidden: Sequence[int] = (128, 128),
        *,
        mode: Literal["joint", "per_agent"] = "joint",
        num_flow_steps: int = 10,
        noise_bound: float | None = 5.0,
    ) -> None:
        super().__init__()
        if mode not in ("joint", "per_agent"):
            raise ValueError(f"mode: expected 'joint' or 'per_agent', got {mode!r}")
        self.obs_dim, self.act_dim, self.n_agents, self.mode = obs_dim, act_dim, n_agents, mode
        if mode == "joint":
            self.flow = FlowBCPolicy(
                n_agents * obs_dim, n_agents * act_dim, hidden, num_flow_steps=num_flow_steps, noise_bound=noise_bound
            )
        else:
            self.flow = FlowBCPolicy(
                obs_dim + n_agents, act_dim, hidden, num_flow_steps=num_flow_steps, noise_bound=noise_bound
            )

    @property
    def num_flow_steps(self) -> int:
        """The number of network calls per `sample` (the flow's Euler steps)."""
        return self.flow.num_flow_steps

    def _rows(self, obs: torch.Tensor) -> torch.Tensor:
        """The flow's condition: the joint state (B, N * O), or every agent's row (B * N, O + N)."""
        return joint_state(obs) if self.mode == "joint" else with_agent_ids(obs).flatten(0, 1)

    def _shape(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, A) -> the flow's layout: (B, N * A) joint, (B * N, A) per agent."""
        return x.flatten(1) if self.mode == "joint" else x.flatten(0, 1)

    def loss(self, obs: torch.Tensor, actions: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """Flow-matching loss on observations (B, N, O) and actions (B, N, A)."""
        check_obs(obs, self.n_agents, self.obs_dim)
        if actions.shape != (*obs.shape[:2], self.act_dim):
            raise ValueError(f"actions: expected shape {(*obs.shape[:2], self.act_dim)}, got {tuple(actions.shape)}")
        return self.flow.loss(self._rows(obs), self._shape(actions), generator=generator)

    def sample(
        self, obs: torch.Tensor, *, generator: torch.Generator | None = None, noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Actions (B, N, A) in [-1, 1] for observations (B, N, O), flowed from the joint `noise` (B, N, A) or from
        fresh N(0, I) noise."""
        check_obs(obs, self.n_agents, self.obs_dim)
        b = obs.shape[0]
        if noise is None:
            noise = randn((b, self.n_agents, self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        elif noise.shape != (b, self.n_agents, self.act_dim):
            raise ValueError(f"noise: expected shape {(b, self.n_agents, self.act_dim)}, got {tuple(noise.shape)}")
        return self.flow.sample(self._rows(obs), noise=self._shape(noise)).reshape(b, self.n_agents, self.act_dim)
