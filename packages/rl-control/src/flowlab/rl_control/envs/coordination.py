"""Two-agent coordination games: single-step episodes with a constant observation, actions a_i in [-1, 1]^2, a
smooth payoff of the joint action, and behaviour data whose joint law is coordinated (its agents' actions are
dependent), so a product of per-agent marginals loses return.

- `matrix`: each agent picks one of two points c_0 = (-0.5, 0), c_1 = (0.5, 0); payoff [[-1, 1], [1, 2]] (not a sum
  of per-agent terms), smoothed by Gaussian kernels of width 0.2 around the points. Behaviour: (c_0, c_1) and
  (c_1, c_0) 45 % each, the rare optimum (c_1, c_1) 10 %.
- `quadratic`: 1 - (||a_1 - g_1||^2 + ||a_2 - g_2||^2) / 2, a peak at the joint target g = (g_1, g_2) with
  g_1 = (0.5, 0.5), g_2 = (-0.5, 0.5) (a separable payoff: the product of marginals loses nothing here). Behaviour
  dominated by suboptimal modes: (g_1, u_2) and (u_1, g_2) 45 % each (u_1 = (-0.5, -0.5), u_2 = (0.5, -0.5), return 0),
  the target 10 %. Behaviour cloning stays far from the peak; a critic's Q term can reach it.
- `ring`: exp(-(||a_1 - a_2|| - 1)^2 / (2 * 0.1^2)), reward for standing one unit apart. Behaviour: a_1 uniform on
  the circle of radius 0.5, a_2 = -a_1 (a continuum of modes).
- `xor`: (1 - tanh(a_1x / 0.1) tanh(a_2x / 0.1)) / 2, reward when the first coordinates have opposite signs.
  Behaviour: (0.5, -0.5) and (-0.5, 0.5) in the first coordinates, half each. An IGM critic (a sum of per-agent
  values) cannot represent it: the acknowledged failure mode of factorised policies.

Every behaviour action gets Gaussian noise of std 0.05 and is clipped to [-1, 1].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from flowlab.core.distributions import rand, randn
from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.envs.names import GAME_NAMES

__all__ = ["GAMES", "CoordinationGame", "game", "game_dataset", "product_of_marginals"]

_NOISE = 0.05
_POINTS = torch.tensor([[-0.5, 0.0], [0.5, 0.0]])
_MATRIX = torch.tensor([[-1.0, 1.0], [1.0, 2.0]])
_QUAD_TARGET = torch.tensor([[0.5, 0.5], [-0.5, 0.5]])
_QUAD_OFF = torch.tensor([[-0.5, -0.5], [0.5, -0.5]])


@dataclass(frozen=True)
class CoordinationGame:
    """A two-agent single-step game: `payoff(actions (B, 2, 2)) -> (B,)`, `behaviour(n, generator) -> (n, 2, 2)` the
    noiseless behaviour draws, and `modes` (M, 2, 2) the behaviour's mode centres with their `weights` (M,) where
    it has finitely many (else None)."""

    name: str
    payoff: Callable[[torch.Tensor], torch.Tensor]
    behaviour: Callable[[int, torch.Generator], torch.Tensor]
    modes: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    n_agents: int = 2
    act_dim: int = 2
    obs_dim: int = 1


def _mixture(modes: torch.Tensor, weights: torch.Tensor) -> Callable[[int, torch.Generator], torch.Tensor]:
    cum = weights.cumsum(0)

    def draw(n: int, generator: torch.Generator) -> torch.Tensor:
        u = rand((n,), generator=generator)
        return modes[torch.searchsorted(cum, u).clamp_max(len(modes) - 1)]

    return draw


def _matrix_payoff(a: torch.Tensor) -> torch.Tensor:
    k = torch.exp(-(a[:, :, None, :] - _POINTS.to(a)).square().sum(-1) / (2 * 0.2**2))  # (B, agent, point)
    return torch.einsum("bj,jk,bk->b", k[:, 0], _MATRIX.to(a), k[:, 1])


def _quadratic_payoff(a: torch.Tensor) -> torch.Tensor:
    return 1.0 - 0.5 * (a - _QUAD_TARGET.to(a)).square().sum((1, 2))


def _ring_payoff(a: torch.Tensor) -> torch.Tensor:
    return torch.exp(-((a[:, 0] - a[:, 1]).norm(dim=-1) - 1.0).square() / (2 * 0.1**2))


def _xor_payoff(a: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1.0 - torch.tanh(a[:, 0, 0] / 0.1) * torch.tanh(a[:, 1, 0] / 0.1))


def _ring_behaviour(n: int, generator: torch.Generator) -> torch.Tensor:
    theta = 2 * math.pi * rand((n,), generator=generator)
    a1 = 0.5 * torch.stack([theta.cos(), theta.sin()], -1)
    return torch.stack([a1, -a1], 1)


def _games() -> dict[str, CoordinationGame]:
    c0, c1 = _POINTS
    matrix_modes = torch.stack([torch.stack(m) for m in ((c0, c1), (c1, c0), (c1, c1))])
    (g1, g2), (u1, u2) = _QUAD_TARGET, _QUAD_OFF
    quad_modes = torch.stack([torch.stack(m) for m in ((g1, u2), (u1, g2), (g1, g2))])
    xor_modes = torch.tensor([[[0.5, 0.0], [-0.5, 0.0]], [[-0.5, 0.0], [0.5, 0.0]]])
    half = torch.tensor([0.5, 0.5])
    matrix_w = torch.tensor([0.45, 0.45, 0.10])
    parts = (  # payoff, behaviour, modes, weights in GAME_NAMES' order: matrix, quadratic, ring, xor
        (_matrix_payoff, _mixture(matrix_modes, matrix_w), matrix_modes, matrix_w),
        (_quadratic_payoff, _mixture(quad_modes, matrix_w), quad_modes, matrix_w),
        (_ring_payoff, _ring_behaviour),
        (_xor_payoff, _mixture(xor_modes, half), xor_modes, half),
    )
    return {name: CoordinationGame(name, *part) for name, part in zip(GAME_NAMES, parts, strict=True)}


GAMES: dict[str, CoordinationGame] = _games()


def game(name: str) -> CoordinationGame:
    """The coordination game called `name` (one of `GAMES`)."""
    if name not in GAMES:
        raise ValueError(f"env: unknown coordination game {name!r}; expected one of {sorted(GAMES)}")
    return GAMES[name]


def game_dataset(name: str, n_transitions: int, *, seed: int) -> OfflineDataset:
    """`n_transitions` single-step episodes of game `name`'s behaviour (with noise 0.05, clipped to [-1, 1]):
    observations and next observations (T, 2, 1) all zero, actions (T, 2, 2), team rewards (T,) from the payoff,
    every episode terminated."""
    g = game(name)
    if isinstance(n_transitions, bool) or not isinstance(n_transitions, int) or n_transitions < 1:
        raise ValueError(f"n_transitions: expected a positive int, got {n_transitions!r}")
    gen = torch.Generator().manual_seed(seed)
    actions = g.behaviour(n_transitions, gen)
    actions = (actions + _NOISE * randn(actions.shape, generator=gen)).clamp(-1.0, 1.0)
    obs = np.zeros((n_transitions, g.n_agents, g.obs_dim), np.float32)
    return OfflineDataset(
        observations=obs,
        actions=actions.numpy().astype(np.float32),
        rewards=g.payoff(actions).numpy().astype(np.float32),
        next_observations=obs,
        terminations=np.ones(n_transitions, bool),
        truncations=np.zeros(n_transitions, bool),
    )


def product_of_marginals(actions: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
    """Draws from the product of the agents' marginals: each agent's column of actions (B, N, A) independently
    permuted over the batch."""
    idx = rand(actions.shape[:2], generator=generator, device=actions.device).argsort(0)
    return torch.gather(actions, 0, idx[..., None].expand_as(actions))
