"""MADiff-lite: behaviour cloning of the joint action with an epsilon-prediction DDPM conditioned on the joint state,
trained with the core's `ddpm_loss` and sampled by `diffusion_steps` ancestral DDPM steps (`sample_diffusion`,
method "ddpm") on diffusers' trailing grid, then clipped to [-1, 1]: one network call per step.

The schedule is DDPM's linear beta from 1e-4 to 0.02 over 1000 training timesteps, sampled in 50 steps. (The same
beta range over only 50 timesteps would end at alpha_bar = 0.6, far from noise, so sampling from N(0, I) would not
match it.)"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from flowlab.core import grids
from flowlab.core.distributions import randn
from flowlab.core.losses import ddpm_loss
from flowlab.core.nets import TimeMLP
from flowlab.core.schedules import DiscreteVP
from flowlab.core.solvers import sample_diffusion
from flowlab.rl_control.mac_flow.agents import MARLAgent, Stage, joint_state

__all__ = ["DiffusionJointBC"]


class _EpsNet(nn.Module):
    """eps_theta(x, t | s): a TimeMLP over the joint action, called with the core's float64 times."""

    def __init__(self, dim: int, cond_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.net = TimeMLP(dim, cond_dim=cond_dim, hidden=hidden, layer_norm=True, time_embed_dim=32)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        return self.net(x=x, t=t.to(x.dtype), cond=cond)


class _DDPMLoss(nn.Module):
    def __init__(self, agent: DiffusionJointBC) -> None:
        super().__init__()
        self.agent = agent

    def forward(self, batch: dict[str, torch.Tensor], generator: torch.Generator):
        a = self.agent
        loss = ddpm_loss(
            a.eps, batch["actions"].flatten(1), a.schedule, generator=generator, cond=joint_state(batch["obs"])
        )
        return loss, {}


class DiffusionJointBC(MARLAgent):
    """See the module docstring. `diffusion_steps` network calls per joint action."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        n_agents: int,
        hidden: Sequence[int] = (128, 128),
        *,
        lr: float = 3e-4,
        diffusion_steps: int = 50,
    ) -> None:
        super().__init__(obs_dim, act_dim, n_agents)
        self.lr = lr
        self.schedule = DiscreteVP.linear(1000, 1e-4, 0.02)
        self.grid = grids.trailing(self.schedule, diffusion_steps)
        self.eps = _EpsNet(n_agents * act_dim, n_agents * obs_dim, hidden)

    def stages(self) -> tuple[Stage, ...]:
        """One stage, "ddpm": the noise-prediction loss at `lr`."""
        return (Stage("ddpm", _DDPMLoss(self), self.lr),)

    @property
    def act_network(self) -> nn.Module:
        """The noise-prediction network, called `diffusion_steps` times per joint action."""
        return self.eps.net

    def _act(self, obs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        b = obs.shape[0]
        noise = randn((b, self.n_agents * self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        x = sample_diffusion(
            self.eps,
            noise,
            self.grid.to(obs.device),
            schedule=self.schedule,
            prediction="epsilon",
            method="ddpm",
            generator=generator,
            cond=joint_state(obs),
        )
        return x.reshape(b, self.n_agents, self.act_dim).clamp(-1.0, 1.0)
