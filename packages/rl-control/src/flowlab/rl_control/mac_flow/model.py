"""MAC-Flow: the configuration, the decentralised one-step policy, and the agent that holds the joint flow (stage 1),
the policy and the factorised critic (stage 2)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from flowlab.core.config import Config
from flowlab.core.distributions import randn
from flowlab.rl_control.mac_flow.agents import MARLAgent, Stage, check_obs, with_agent_ids
from flowlab.rl_control.mac_flow.critic import FactorisedCritic
from flowlab.rl_control.mac_flow.joint_flow import JointFlowBC
from flowlab.rl_control.mac_flow.names import METHODS, Method
from flowlab.rl_control.mac_flow.objective import FlowBCObjective, distillation_loss, td_loss
from flowlab.rl_control.policies import OneStepPolicy

__all__ = ["METHODS", "DecentralisedOneStepPolicy", "MACFlow", "MARLConfig"]


@dataclass(frozen=True)
class MARLConfig(Config):
    """The settings of MAC-Flow and of its baselines (`method`), shared by the CLI and the benchmarks.

    MAC-Flow: `bc_flow` "joint" (the paper's flow over all agents' actions given the joint state) or "per_agent"
    (the official code's shared per-agent flow); `mixer`: how the per-agent values make Q_tot ("mean", "vdn" sum,
    "qmix"); `alpha`: the distillation weight; `normalize_q_loss`: divide the Q term by the batch's mean |Q_tot|
    (keeps alpha transferable across data sets); `ensemble`: critic copies (TD targets take their min).
    Baselines: "joint_flow" (stage 1 alone, `num_flow_steps` calls per action), "gaussian_bc" (a diagonal Gaussian
    over the joint action given the joint state), "independent_bc" (a per-agent Gaussian on the agent's own
    observation), "matd3bc" (per-agent deterministic actors, the mean-mixed critic, TD3+BC's weight `bc_weight`,
    target smoothing `policy_noise` clipped at `noise_clip`), "diffusion_bc" (MADiff-lite: an epsilon-prediction DDPM
    over the joint action, `diffusion_steps` ancestral steps)."""

    method: Method = "mac_flow"
    bc_flow: Literal["joint", "per_agent"] = "joint"
    mixer: Literal["mean", "vdn", "qmix"] = "mean"
    hidden: tuple[int, ...] = (128, 128)
    lr: float = 3e-4
    gamma: float = 0.995
    tau: float = 0.005
    num_flow_steps: int = 10
    alpha: float = 1.0
    normalize_q_loss: bool = True
    ensemble: int = 2
    noise_bound: float | None = 5.0
    # baselines
    bc_weight: float = 2.5
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    diffusion_steps: int = 50

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.gamma < 1:
            raise ValueError(f"gamma: expected a value in [0, 1), got {self.gamma}")
        if not 0 < self.tau <= 1:
            raise ValueError(f"tau: expected a Polyak rate in (0, 1], got {self.tau}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr: expected a positive learning rate, got {self.lr}")
        for name in ("alpha", "bc_weight", "policy_noise", "noise_clip"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name}: expected a finite value >= 0, got {value}")
        for name in ("num_flow_steps", "ensemble", "diffusion_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")


class DecentralisedOneStepPolicy(nn.Module):
    """mu(o_i, onehot(i), eps_i): one shared `OneStepPolicy` network applied to every agent's row, so agent i's action
    depends on its own observation and noise only. forward(obs (B, N, O), noise (B, N, A)) -> unclipped (B, N, A)."""

    def __init__(self, obs_dim: int, act_dim: int, n_agents: int, hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.onestep = OneStepPolicy(obs_dim + n_agents, act_dim, hidden)

    def forward(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """obs: (B, N, O), noise: (B, N, A) -> actions (B, N, A), each agent's row from its own observation, id and
        noise."""
        b, n, _ = obs.shape
        return self.onestep(with_agent_ids(obs).flatten(0, 1), noise.flatten(0, 1)).reshape(b, n, self.act_dim)

    def sample(self, obs: torch.Tensor, *, generator: torch.Generator | None) -> torch.Tensor:
        """Actions (B, N, A) in [-1, 1] from fresh noise: one network call for all agents."""
        noise = randn((*obs.shape[:2], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        return self(obs, noise).clamp(-1.0, 1.0)


class _PolicyObjective(nn.Module):
    """Stage 2 for `fit`: the critic's TD loss plus the policy's distillation loss. Its parameters are the policy's
    and the critic's; the trained flow is held outside the module tree, so stage 2 neither updates nor checkpoints it
    (stage 1's checkpoint holds it)."""

    def __init__(
        self, policy: DecentralisedOneStepPolicy, critic: FactorisedCritic, flow: JointFlowBC, config: MARLConfig
    ) -> None:
        super().__init__()
        self.policy, self.critic, self.config = policy, critic, config
        self._flow = (flow,)

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator):
        c = self.config
        with torch.no_grad():
            next_actions = self.policy.sample(batch["next_obs"], generator=generator)
        critic, logs = td_loss(self.critic, batch, next_actions, c.gamma)
        actor = distillation_loss(
            self.policy,
            self._flow[0],
            self.critic,
            batch["obs"],
            alpha=c.alpha,
            normalize_q=c.normalize_q_loss,
            generator=generator,
        )
        return critic + actor, {**logs, "critic_loss": critic.detach(), "actor_loss": actor.detach()}


class MACFlow(MARLAgent):
    """MAC-Flow for `n_agents` agents: `flow` (a `JointFlowBC`, stage 1), `policy` (the decentralised one-step
    policy) and `critic` (a `FactorisedCritic`), trained in the stages "bc" then "policy" (`train_marl`). Acting is
    one call of the policy network for all agents."""

    def __init__(self, config: MARLConfig, *, obs_dim: int, act_dim: int, n_agents: int) -> None:
        super().__init__(obs_dim, act_dim, n_agents)
        if not isinstance(config, MARLConfig):
            raise ValueError(f"config: expected a MARLConfig, got {type(config).__name__}")
        self.config = config
        c = config
        self.flow = JointFlowBC(
            obs_dim,
            act_dim,
            n_agents,
            c.hidden,
            mode=c.bc_flow,
            num_flow_steps=c.num_flow_steps,
            noise_bound=c.noise_bound,
        )
        self.policy = DecentralisedOneStepPolicy(obs_dim, act_dim, n_agents, c.hidden)
        self.critic = FactorisedCritic(obs_dim, act_dim, n_agents, c.hidden, mixer=c.mixer, ensemble=c.ensemble)

    def stages(self) -> tuple[Stage, ...]:
        """The stages "bc" (the joint flow) then "policy" (the one-step policy and critic, with a target update after
        each step)."""
        c = self.config
        return (
            Stage("bc", FlowBCObjective(self.flow), c.lr),
            Stage(
                "policy",
                _PolicyObjective(self.policy, self.critic, self.flow, c),
                c.lr,
                after_step=lambda: self.critic.update_target(c.tau),
            ),
        )

    @property
    def act_network(self) -> nn.Module:
        """The one-step policy's network, called once per joint action."""
        return self.policy.onestep.net

    def _act(self, obs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.policy.sample(obs, generator=generator)

    def q_tot(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The critic's team value (ensemble mean): (B,)."""
        check_obs(obs, self.n_agents, self.obs_dim)
        return self.critic.q_tot(obs, actions).mean(0)
