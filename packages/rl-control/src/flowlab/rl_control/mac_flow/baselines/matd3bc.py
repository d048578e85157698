"""MA-TD3+BC (OMAR-like, without its CEM step): a shared deterministic actor per agent on [o_i, onehot(i)] (tanh
output), the mean-mixed factorised critic with twin copies, TD3's target smoothing, and TD3+BC's actor loss
-lambda Q_tot(s, pi) + mean (pi - a)^2 with lambda = bc_weight / mean |Q_tot|. The actor updates at every step
(TD3's policy delay is left out)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flowlab.core.distributions import randn
from flowlab.core.nets import MLP
from flowlab.rl_control.mac_flow.agents import MARLAgent, Stage, with_agent_ids
from flowlab.rl_control.mac_flow.critic import FactorisedCritic
from flowlab.rl_control.mac_flow.objective import td_loss
from flowlab.rl_control.networks import TargetNetwork, frozen

__all__ = ["MATD3BC"]


class _TD3BCStep(nn.Module):
    def __init__(self, agent: MATD3BC) -> None:
        super().__init__()
        self.agent = agent

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator):
        a = self.agent
        with torch.no_grad():
            next_obs = batch["next_obs"]
            smooth = randn(batch["actions"].shape, generator=generator, device=next_obs.device, dtype=next_obs.dtype)
            smooth = (a.policy_noise * smooth).clamp(-a.noise_clip, a.noise_clip)
            next_actions = (a.policy(next_obs, target=True) + smooth).clamp(-1.0, 1.0)
        critic, logs = td_loss(a.critic, batch, next_actions, a.gamma)
        pi = a.policy(batch["obs"])
        with frozen(a.critic):
            q = a.critic.q_tot(batch["obs"], pi)[0]
        lam = a.bc_weight / q.detach().abs().mean().clamp_min(1e-6)
        actor = -lam * q.mean() + (pi - batch["actions"]).square().mean()
        return critic + actor, {**logs, "critic_loss": critic.detach(), "actor_loss": actor.detach()}


class MATD3BC(MARLAgent):
    """See the module docstring. One network call per joint action."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_agents: int,
        hidden: Sequence[int] = (128, 128),
        *,
        lr: float = 3e-4,
        gamma: float = 0.995,
        tau: float = 0.005,
        bc_weight: float = 2.5,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
    ) -> None:
        super().__init__(obs_dim, act_dim, n_agents)
        self.lr, self.gamma, self.tau, self.bc_weight = lr, gamma, tau, bc_weight
        self.policy_noise, self.noise_clip = policy_noise, noise_clip
        self.actor = TargetNetwork(MLP(obs_dim + n_agents, act_dim, hidden, layer_norm=True))
        self.critic = FactorisedCritic(obs_dim, act_dim, n_agents, hidden, mixer="mean", ensemble=2)

    def policy(self, obs: torch.Tensor, *, target: bool = False) -> torch.Tensor:
        """pi(o_i, onehot(i)) = tanh(MLP): (B, N, A) for observations (B, N, O)."""
        return torch.tanh(self.actor.pick(target)(with_agent_ids(obs)))

    def _update_targets(self) -> None:
        self.actor.update_target(self.tau)
        self.critic.update_target(self.tau)

    def stages(self) -> tuple[Stage, ...]:
        """One stage, "td3bc": the TD3+BC actor-critic update at `lr`, with target updates after each step."""
        return (Stage("td3bc", _TD3BCStep(self), self.lr, after_step=self._update_targets),)

    @property
    def act_network(self) -> nn.Module:
        """The online actor, called once per joint action."""
        return self.actor.online

    def _act(self, obs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.policy(obs)
