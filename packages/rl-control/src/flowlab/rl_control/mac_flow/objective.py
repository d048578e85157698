"""MAC-Flow's losses: flow matching for stage 1, then the factorised critic's TD loss and the one-step policy's
distillation towards the joint flow with a Q term, both in one step of stage 2 (the critic frozen in the policy
term)."""

from __future__ import annotations

import torch
from torch import nn

from flowlab.core.distributions import randn
from flowlab.rl_control.mac_flow.critic import FactorisedCritic
from flowlab.rl_control.mac_flow.joint_flow import JointFlowBC
from flowlab.rl_control.networks import aggregate, frozen
from flowlab.rl_control.policies import onestep_loss

__all__ = ["FlowBCObjective", "distillation_loss", "td_loss", "team_reward"]


def team_reward(rewards: torch.Tensor) -> torch.Tensor:
    """The team reward (B,): a shared reward (B,) as it is, per-agent rewards (B, N) averaged over the agents."""
    return rewards if rewards.dim() == 1 else rewards.mean(-1)


def td_loss(
    critic: FactorisedCritic,
    batch: dict[str, torch.Tensor],
    next_actions: torch.Tensor,
    gamma: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """sum_k mean_b (Q_tot,k(s, a) - y)^2 with y = r + gamma * mask * min_k Qbar_tot,k(s', a'), Qbar the target copies
    and a' = next_actions (B, N, A) (the current policy's actions at s'). batch: obs, actions, rewards, next_obs,
    masks (see `OfflineDataset.tensors`)."""
    with torch.no_grad():
        next_q = aggregate(critic.q_tot(batch["next_obs"], next_actions, target=True), "min")
        y = team_reward(batch["rewards"]) + gamma * batch["masks"] * next_q
    q = critic.q_tot(batch["obs"], batch["actions"])
    return (q - y).square().mean(1).sum(), {"q": q.mean().detach()}


def distillation_loss(
    policy: nn.Module,
    flow: JointFlowBC,
    critic: FactorisedCritic,
    obs: torch.Tensor,
    *,
    alpha: float,
    normalize_q: bool,
    generator: torch.Generator,
) -> torch.Tensor:
    """alpha E ||mu(o_i, eps_i) - phi_BC(eps)_i||^2 - E[Q_tot(s, clip(mu))] / mean|Q_tot| (`onestep_loss`), with one
    joint noise eps (B, N, A) feeding both: the flow integrates all of it, agent i's one-step policy sees eps_i. The
    critic (ensemble mean) takes no gradient here. obs: (B, N, O)."""
    noise = randn((*obs.shape[:2], flow.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
    with torch.no_grad():
        target = flow.sample(obs, noise=noise)
    mu = policy(obs, noise)
    with frozen(critic):
        q = aggregate(critic.q_tot(obs, mu.clamp(-1.0, 1.0)), "mean")
    return onestep_loss(mu, target, q, alpha=alpha, normalize_q=normalize_q)


class FlowBCObjective(nn.Module):
    """Stage 1 as a module for `fit`: `forward(batch, generator)` is the flow's flow-matching loss on the batch."""

    def __init__(self, flow: JointFlowBC) -> None:
        super().__init__()
        self.flow = flow

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator):
        """`(loss, {})`: the flow-matching loss of the flow on `batch["obs"]` and `batch["actions"]`."""
        return self.flow.loss(batch["obs"], batch["actions"], generator=generator), {}
