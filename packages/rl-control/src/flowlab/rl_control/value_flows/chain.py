"""The stochastic chain MDP with exact return distributions (Monte Carlo) and exact values (dynamic programming).

Cells 0..n_cells-1 on a line; the goal lies just past the last cell. A continuous action a in [-1, 1] moves the
agent by m = floor(2a + 1/2) in {-2, ..., 2}; with probability `slip` a random +-1 is added; positions are clipped at
0. Every step pays `step_reward`; entering the goal adds a bonus drawn uniformly from `bonuses` (bimodal returns) and
terminates. The behaviour policy is a Gaussian around a fixed drift, clipped to [-1, 1]. Everything is batched torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from flowlab.rl_control.data import OfflineDataset

__all__ = ["ChainMDP", "ChainStep"]


@dataclass(frozen=True)
class ChainStep:
    """One batched transition: next positions (B,), rewards (B,), terminated (B,) bool."""

    position: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor


@dataclass(frozen=True)
class ChainMDP:
    """The chain MDP and its behaviour policy (see the module docstring); observations are one-hot cells."""

    n_cells: int = 12
    slip: float = 0.2
    step_reward: float = -0.01
    bonuses: tuple[float, ...] = (1.0, 3.0)
    gamma: float = 0.95
    max_steps: int = 30
    drift: float = 0.4
    sigma: float = 0.5

    def __post_init__(self) -> None:
        if self.n_cells < 2:
            raise ValueError(f"n_cells: expected >= 2, got {self.n_cells}")
        if not 0.0 <= self.slip <= 1.0:
            raise ValueError(f"slip: expected a probability, got {self.slip}")
        if not 0.0 <= self.gamma < 1.0:
            raise ValueError(f"gamma: expected a value in [0, 1), got {self.gamma}")
        if self.sigma <= 0:
            raise ValueError(f"sigma: expected > 0, got {self.sigma}")

    @property
    def obs_dim(self) -> int:
        """The observation size: one-hot cells, so `n_cells`."""
        return self.n_cells

    @property
    def reward_range(self) -> tuple[float, float]:
        """The smallest and largest reward of one step, `(step_reward, step_reward + max(bonuses))`."""
        return self.step_reward, self.step_reward + max(self.bonuses)

    def observe(self, position: torch.Tensor) -> torch.Tensor:
        """position: (B,) long -> one-hot observations (B, n_cells) float32."""
        return torch.nn.functional.one_hot(position, self.n_cells).float()

    @staticmethod
    def move(action: torch.Tensor) -> torch.Tensor:
        """action: (B,) in [-1, 1] -> integer move floor(2a + 1/2) in {-2..2}: (B,) long."""
        return torch.floor(2 * action.clamp(-1, 1) + 0.5).clamp(-2, 2).long()

    def step(self, position: torch.Tensor, action: torch.Tensor, *, generator: torch.Generator) -> ChainStep:
        """position: (B,) long, action: (B,) -> ChainStep."""
        b = position.shape[0]
        u = torch.rand(b, generator=generator, device=position.device)
        sign = torch.where(torch.rand(b, generator=generator, device=position.device) < 0.5, -1, 1)
        slip = torch.where(u < self.slip, sign, 0)
        new = (position + self.move(action) + slip).clamp_min(0)
        done = new >= self.n_cells
        bonus_idx = torch.randint(len(self.bonuses), (b,), generator=generator, device=position.device)
        bonus = torch.tensor(self.bonuses, device=position.device)[bonus_idx]
        reward = self.step_reward + torch.where(done, bonus, torch.zeros_like(bonus))
        return ChainStep(new.clamp_max(self.n_cells - 1), reward, done)

    def behaviour_action(self, n: int, *, generator: torch.Generator, device=None) -> torch.Tensor:
        """n actions of the behaviour policy, clip(N(drift, sigma^2), -1, 1): (n,)."""
        z = torch.randn(n, generator=generator, device=device)
        return (self.drift + self.sigma * z).clamp(-1, 1)

    def collect(self, n_transitions: int, *, generator: torch.Generator, n_envs: int = 256) -> OfflineDataset:
        """Offline data from the behaviour policy: episodes start in uniform random cells and are truncated after
        `max_steps`. `next_actions` holds a fresh behaviour action at the next state (policy evaluation)."""
        if n_transitions < 1:
            raise ValueError(f"n_transitions: expected >= 1, got {n_transitions}")
        pos = torch.randint(self.n_cells, (n_envs,), generator=generator)
        age = torch.zeros(n_envs, dtype=torch.long)
        cols: dict[str, list[torch.Tensor]] = {k: [] for k in ("s", "a", "r", "s2", "a2", "term", "trunc")}
        total = 0
        while total < n_transitions:
            a = self.behaviour_action(n_envs, generator=generator)
            out = self.step(pos, a, generator=generator)
            age = age + 1
            trunc = (age >= self.max_steps) & ~out.terminated
            cols["s"].append(pos)
            cols["a"].append(a)
            cols["r"].append(out.reward)
            cols["s2"].append(out.position)
            cols["a2"].append(self.behaviour_action(n_envs, generator=generator))
            cols["term"].append(out.terminated)
            cols["trunc"].append(trunc)
            total += n_envs
            reset = out.terminated | trunc
            pos = torch.where(reset, torch.randint(self.n_cells, (n_envs,), generator=generator), out.position)
            age = torch.where(reset, torch.zeros_like(age), age)
        cat = {k: torch.stack(v, 1).reshape(-1)[:n_transitions] for k, v in cols.items()}  # env-major episodes
        return OfflineDataset(
            observations=self.observe(cat["s"]).numpy(),
            actions=cat["a"][:, None].numpy(),
            rewards=cat["r"].numpy(),
            next_observations=self.observe(cat["s2"]).numpy(),
            terminations=cat["term"].numpy(),
            truncations=cat["trunc"].numpy(),
            next_actions=cat["a2"][:, None].numpy(),
        )

    def grid(self, n_actions: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
        """The evaluation grid: positions (S*A,) long and actions (S*A,) on linspace(-1, 1, n_actions)."""
        pos = torch.arange(self.n_cells).repeat_interleave(n_actions)
        act = torch.linspace(-1, 1, n_actions).repeat(self.n_cells)
        return pos, act

    def monte_carlo_returns(
        self,
        position: torch.Tensor,
        action: torch.Tensor,
        n_rollouts: int,
        *,
        generator: torch.Generator,
        horizon: int = 400,
    ) -> torch.Tensor:
        """Discounted returns of `n_rollouts` rollouts per (s, a): first action a, then the behaviour policy until the
        goal (or `horizon` steps, where gamma^horizon is negligible). position, action: (G,) -> (G, n_rollouts)."""
        g = position.shape[0]
        pos = position.repeat_interleave(n_rollouts)
        act = action.repeat_interleave(n_rollouts)
        ret = torch.zeros(pos.shape[0], dtype=torch.float64)
        idx = torch.arange(pos.shape[0])  # rollouts still running
        disc = 1.0
        for _ in range(horizon):
            out = self.step(pos, act, generator=generator)
            ret[idx] += disc * out.reward.double()
            keep = ~out.terminated
            idx, pos = idx[keep], out.position[keep]
            if idx.numel() == 0:
                break
            disc *= self.gamma
            act = self.behaviour_action(pos.shape[0], generator=generator)
        return ret.reshape(g, n_rollouts)

    def _move_probs(self) -> torch.Tensor:
        """P(m) for m = -2..2 under the behaviour policy: (5,) float64."""
        phi = lambda x: 0.5 * (1 + math.erf((x - self.drift) / (self.sigma * math.sqrt(2))))  # noqa: E731
        edges = [-math.inf, -0.75, -0.25, 0.25, 0.75, math.inf]
        cdf = [0.0 if e == -math.inf else 1.0 if e == math.inf else phi(e) for e in edges]
        return torch.tensor([cdf[i + 1] - cdf[i] for i in range(5)], dtype=torch.float64)

    def _outcomes(self, position: int, m: int) -> list[tuple[float, int | None]]:
        """(probability, next cell or None for the goal) after move m with slip."""
        out = []
        for d, p in ((0, 1 - self.slip), (-1, self.slip / 2), (1, self.slip / 2)):
            new = max(position + m + d, 0)
            out.append((p, None if new >= self.n_cells else new))
        return out

    def exact_values(self) -> torch.Tensor:
        """State values V(s) of the behaviour policy by solving the Bellman linear system: (n_cells,) float64."""
        n, pm = self.n_cells, self._move_probs()
        mean_bonus = sum(self.bonuses) / len(self.bonuses)
        P = torch.zeros(n, n, dtype=torch.float64)
        r = torch.full((n,), self.step_reward, dtype=torch.float64)
        for s in range(n):
            for k, m in enumerate(range(-2, 3)):
                for p, nxt in self._outcomes(s, m):
                    if nxt is None:
                        r[s] += pm[k] * p * mean_bonus
                    else:
                        P[s, nxt] += pm[k] * p
        return torch.linalg.solve(torch.eye(n, dtype=torch.float64) - self.gamma * P, r)

    def exact_q(self, position: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q(s, a) of the behaviour policy from `exact_values`: (G,) float64."""
        v = self.exact_values()
        mean_bonus = sum(self.bonuses) / len(self.bonuses)
        out = []
        for s, m in zip(position.tolist(), self.move(action).tolist(), strict=True):
            q = self.step_reward
            for p, nxt in self._outcomes(s, m):
                q += p * (mean_bonus if nxt is None else self.gamma * float(v[nxt]))
            out.append(q)
        return torch.tensor(out, dtype=torch.float64)
