"""Policies shared by the offline RL methods: the behaviour-cloning flow, FQL's one-step policy distilled from it
against a critic (`onestep_loss`), argmax-Q rejection sampling over flow candidates, and `GymPolicy`, a trained
agent acting on gymnasium observations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from flowlab.core import grids
from flowlab.core.distributions import rand, randn
from flowlab.core.losses import flow_matching_loss
from flowlab.core.nets import MLP, TimeMLP
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import clipped_euler, solve_ode

if TYPE_CHECKING:
    import gymnasium as gym

__all__ = ["FlowBCPolicy", "GymPolicy", "OneStepPolicy", "onestep_loss", "rejection_sample"]


class FlowBCPolicy(nn.Module):
    """Behaviour-cloning flow policy: conditional flow matching on the linear path, Euler sampling with the state
    clipped after each step to the `path_envelope` of [-1, 1] with |eps| <= noise_bound (None: to [-1, 1] itself),
    so actions end in [-1, 1]. `sample` makes exactly `num_flow_steps` network calls for any batch."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int] = (128, 128),
        *,
        num_flow_steps: int = 10,
        noise_bound: float | None = 5.0,
    ):
        super().__init__()
        self.act_dim = act_dim
        self.num_flow_steps = num_flow_steps
        self.noise_bound = noise_bound
        self.net = TimeMLP(act_dim, cond_dim=obs_dim, hidden=hidden, layer_norm=True, time_embed_dim=32)
        self.path = AffinePath(CondOT())

    def loss(self, obs: torch.Tensor, actions: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        """The conditional flow-matching loss on the linear path from Gaussian noise to `actions`: obs: (B, O), actions:
        (B, A) -> a scalar."""
        x0 = randn(actions.shape, generator=generator, device=actions.device, dtype=actions.dtype)
        t = rand((actions.shape[0],), generator=generator, device=actions.device, dtype=actions.dtype)
        ps = self.path.sample(x0, actions, t)
        return flow_matching_loss(self.net(x=ps.x_t, t=ps.t, cond=obs), ps)

    def sample(
        self, obs: torch.Tensor, *, generator: torch.Generator | None = None, noise: torch.Tensor | None = None
    ) -> torch.Tensor:
        """obs: (B, O) -> actions (B, A) in [-1, 1], flowed from `noise` (B, A) or from fresh N(0, I) noise."""
        if noise is None:
            noise = randn((obs.shape[0], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        grid = grids.uniform(self.num_flow_steps, device=obs.device, dtype=obs.dtype)
        return solve_ode(self.net, noise, grid, method=clipped_euler(-1.0, 1.0, noise_bound=self.noise_bound), cond=obs)


def onestep_loss(
    mu: torch.Tensor, target: torch.Tensor, q: torch.Tensor, *, alpha: float, normalize_q: bool
) -> torch.Tensor:
    """FQL's one-step objective: -mean(Q) (divided by the batch's mean |Q|, without gradient, with `normalize_q`)
    plus alpha E||mu - target||^2. mu, target: (..., A) the unclipped one-step actions and the teacher's actions from
    the same noise (the squared error is summed over A and averaged over the rest); q: (B,) the critic's values of
    the clipped one-step actions."""
    q_loss = -q.mean()
    if normalize_q:
        q_loss = q_loss / q.detach().abs().mean().clamp_min(1e-6)
    return q_loss + alpha * (mu - target).square().sum(-1).mean()


class OneStepPolicy(nn.Module):
    """FQL's one-step policy a = clip(mu(s, eps), -1, 1) with eps ~ N(0, I): one network call per action, trained
    (`loss`) to raise Q while staying close to the BC flow's action from the same eps."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.net = MLP(obs_dim + act_dim, act_dim, hidden, layer_norm=True)

    def forward(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The unclipped map mu(s, eps). obs: (B, O), noise: (B, A) -> (B, A)."""
        return self.net(torch.cat([obs, noise], -1))

    def sample(self, obs: torch.Tensor, *, generator: torch.Generator | None) -> torch.Tensor:
        """obs: (B, O) -> actions (B, A) in [-1, 1]."""
        return self(
            obs, randn((obs.shape[0], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        ).clamp(-1.0, 1.0)

    def loss(
        self,
        obs: torch.Tensor,
        q_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        bc_policy: FlowBCPolicy,
        *,
        alpha: float,
        normalize_q: bool,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """`onestep_loss` with the BC flow's action from the same eps as the target, the squared error on the
        unclipped mu (so a saturated output still gets a gradient). q_fn(obs, actions) -> (B,) must not update the
        critic (the caller freezes it)."""
        noise = randn((obs.shape[0], self.act_dim), generator=generator, device=obs.device, dtype=obs.dtype)
        with torch.no_grad():
            target = bc_policy.sample(obs, noise=noise)
        mu = self(obs, noise)
        return onestep_loss(mu, target, q_fn(obs, mu.clamp(-1.0, 1.0)), alpha=alpha, normalize_q=normalize_q)


def rejection_sample(
    policy: FlowBCPolicy,
    q_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    obs: torch.Tensor,
    *,
    num_samples: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """argmax_Q over `num_samples` BC-flow candidates per observation, all in one (N * num_samples) batch.
    obs: (N, O), q_fn(obs, actions) -> (N * num_samples,) -> actions (N, A)."""
    n = obs.shape[0]
    rep = obs.repeat_interleave(num_samples, 0)
    cand = policy.sample(rep, generator=generator)
    best = q_fn(rep, cand).reshape(n, num_samples).argmax(1)
    return cand.reshape(n, num_samples, -1)[torch.arange(n, device=obs.device), best]


class GymPolicy:
    """A trained single-agent policy for gymnasium: `act(obs)` (or calling it) maps numpy observations (O,), or a
    vector env's batch (E, O), to actions (A,) or (E, A) in the Box `action_space` (the single copy's:
    `env.action_space`, or a vector env's `single_action_space`; None: the agent's own [-1, 1]), as a numpy array of
    the space's dtype. `agent` is anything with `obs_dim`, `act_dim` and `act(obs (N, O), generator=) -> (N, A)` in
    [-1, 1] (the Value Flows agents of `make_agent` or `load_agent`); it acts on `device` (None: where its weights
    are; else it is moved there), without gradients.

    Acting is deterministic by default: every call draws its noise from a fresh generator seeded with 0, so a batch
    of observations always gets the same actions. With `seed` or `generator` the noise runs on from call to call
    (stochastic, reproducible from the seed)."""

    def __init__(
        self,
        agent: nn.Module,
        action_space: gym.spaces.Box | None = None,
        *,
        device: torch.device | str | None = None,
        seed: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        if seed is not None and generator is not None:
            raise ValueError("seed, generator: give one of them, or neither for deterministic actions")
        if action_space is not None:
            low, high = (np.asarray(getattr(action_space, k, np.nan), dtype=np.float64) for k in ("low", "high"))
            if action_space.shape != (agent.act_dim,) or not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ValueError(
                    f"action_space: expected a bounded Box of shape ({agent.act_dim},), got {action_space}"
                )
        self.agent = agent if device is None else agent.to(device)
        self.device = next(self.agent.parameters()).device
        self.action_space = action_space
        self.generator = torch.Generator().manual_seed(seed) if seed is not None else generator

    def act(self, obs: np.ndarray) -> np.ndarray:
        """obs: (O,) or (E, O) -> actions (A,) or (E, A) in the action space."""
        from flowlab.rl_control.envs.control import to_box  # gymnasium loads only with a gymnasium policy

        obs = np.asarray(obs, dtype=np.float32)
        if obs.ndim not in (1, 2) or obs.shape[-1] != self.agent.obs_dim:
            raise ValueError(f"obs: expected ({self.agent.obs_dim},) or (E, {self.agent.obs_dim}), got {obs.shape}")
        if not np.isfinite(obs).all():
            raise ValueError("obs: contains NaN or inf values")
        generator = self.generator if self.generator is not None else torch.Generator().manual_seed(0)
        batch = torch.as_tensor(obs.reshape(-1, obs.shape[-1]), device=self.device)
        with torch.no_grad():
            actions = self.agent.act(batch, generator=generator).clamp(-1.0, 1.0).cpu().numpy()
        actions = actions.reshape(*obs.shape[:-1], -1)
        return actions if self.action_space is None else to_box(actions, self.action_space)

    __call__ = act
