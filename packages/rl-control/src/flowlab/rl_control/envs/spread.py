"""The multi-agent particle environment simple_spread (`mpe2.simple_spread_v3`, PettingZoo's parallel API, continuous
actions) as a batch of copies, its scripted landmark-assignment behaviour, an offline collector and a batched
evaluator.

N agents cover N landmarks; every agent receives the same team reward: minus the summed distance from each landmark
to its nearest agent, and -1 per collision weighted by `local_ratio` (mpe2's reward, averaged over the agents).
Episodes last `max_cycles` steps and end by truncation. An agent's observation (O = 6N) is [own velocity, own
position, landmarks relative to it, other agents relative to it, communication]. Its action is the 2-D force
u = (u_x, u_y) in [-1, 1]^2, as in the MAC-Flow paper's MPE variant; `to_env_action` writes it as mpe2's five
continuous components [no-op, left, right, down, up] = [0, relu(-u_x), relu(u_x), relu(-u_y), relu(u_y)] in [0, 1],
which mpe2 turns back into the force (right - left, up - down).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import version
from itertools import permutations
from pathlib import Path

import numpy as np
import torch

from flowlab.core.artifacts import Artifact, ensure
from flowlab.core.config import Config
from flowlab.rl_control.data import TRANSITION_FIELDS, OfflineDataset, load_dataset
from flowlab.rl_control.envs.names import SPREAD_QUALITIES

__all__ = [
    "SPREAD_QUALITIES",
    "SpreadData",
    "SpreadEnvs",
    "SpreadStep",
    "assignment_costs",
    "collect_spread",
    "evaluate_spread",
    "sample_assignment",
    "spread_controller",
    "spread_data_artifact",
    "spread_dataset",
    "to_env_action",
]

#: std of the Gaussian noise on the scripted controller's normalised actions, by quality
_NOISE = {"expert": 0.05, "medium": 0.3}
#: proportional and derivative gains of the scripted controller (tuned so the expert settles on its landmark)
_KP, _KD = 2.0, 1.0


def to_env_action(actions: np.ndarray) -> np.ndarray:
    """Forces (..., 2) in [-1, 1]^2 -> mpe2's continuous actions (..., 5) in [0, 1], float32 (see the module
    docstring)."""
    u = np.clip(actions, -1.0, 1.0)
    zero = np.zeros_like(u[..., 0])
    return np.stack([zero, -u[..., 0], u[..., 0], -u[..., 1], u[..., 1]], -1).clip(0.0, 1.0).astype(np.float32)


@dataclass(frozen=True)
class SpreadStep:
    """One step of every copy: next observations (E, N, O), team rewards (E,), terminated and truncated (E,)."""

    observations: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


class SpreadEnvs:
    """`n_envs` copies of simple_spread with `n_agents` agents, stepped together (episodes have a fixed length, so
    the copies stay in step). `reset(seeds)` seeds each copy's episode; observations are (E, N, O) float32."""

    def __init__(self, n_envs: int, *, n_agents: int = 3, max_cycles: int = 25, local_ratio: float = 0.5) -> None:
        from mpe2 import simple_spread_v3

        for name, value, low in (("n_envs", n_envs, 1), ("n_agents", n_agents, 2), ("max_cycles", max_cycles, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError(f"local_ratio: expected a weight in [0, 1], got {local_ratio}")
        self.n_envs, self.n_agents, self.max_cycles = n_envs, n_agents, max_cycles
        self.envs = [
            simple_spread_v3.parallel_env(
                N=n_agents, local_ratio=local_ratio, max_cycles=max_cycles, continuous_actions=True
            )
            for _ in range(n_envs)
        ]
        self.agents = list(self.envs[0].possible_agents)
        self.obs_dim = int(self.envs[0].observation_space(self.agents[0]).shape[0])
        self.act_dim = 2  # the force; mpe2's 5-D action is written by `to_env_action`

    def _stack(self, per_env: list[dict]) -> np.ndarray:
        return np.stack([[d[a] for a in self.agents] for d in per_env]).astype(np.float32)

    def reset(self, seeds: np.ndarray) -> np.ndarray:
        """Start a new episode in every copy, copy e from seeds[e]. Returns observations (E, N, O)."""
        seeds = np.asarray(seeds)
        if seeds.shape != (self.n_envs,):
            raise ValueError(f"seeds: expected one seed per copy, shape ({self.n_envs},), got {seeds.shape}")
        return self._stack([env.reset(seed=int(s))[0] for env, s in zip(self.envs, seeds, strict=True)])

    def step(self, actions: np.ndarray) -> SpreadStep:
        """Step every copy with forces (E, N, 2) in [-1, 1]^2."""
        actions = np.asarray(actions)
        expected = (self.n_envs, self.n_agents, self.act_dim)
        if actions.shape != expected:
            raise ValueError(f"actions: expected shape {expected} (copies, agents, action), got {actions.shape}")
        if not np.all(np.isfinite(actions)):
            raise ValueError("actions: contains NaN or inf values")
        env_actions = to_env_action(actions)
        obs, rew, term, trunc = [], [], [], []
        for env, a in zip(self.envs, env_actions, strict=True):
            o, r, te, tr, _ = env.step(dict(zip(self.agents, a, strict=True)))
            obs.append(o)
            rew.append(np.mean([r[k] for k in self.agents]))
            term.append(any(te[k] for k in self.agents))
            trunc.append(any(tr[k] for k in self.agents))
        return SpreadStep(self._stack(obs), np.asarray(rew, np.float32), np.asarray(term), np.asarray(trunc))

    def close(self) -> None:
        """Closes every environment copy."""
        for env in self.envs:
            env.close()


def assignment_costs(obs: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """The summed distance from each agent to its landmark under every assignment: obs (E, N, O), perms (P, N) the
    landmark of each agent -> (E, P)."""
    e, n, _ = obs.shape
    dist = np.linalg.norm(obs[..., 4 : 4 + 2 * n].reshape(e, n, n, 2), axis=-1)  # (E, agent, landmark)
    return np.take_along_axis(dist[:, None], perms[None, :, :, None], axis=3)[..., 0].sum(-1)


@cache
def _assignments(n: int) -> np.ndarray:
    """Every assignment of n agents to n landmarks: (n!, n), built once per n (the behaviour draws one every step)."""
    return np.array(list(permutations(range(n))))


def sample_assignment(obs: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """A joint landmark assignment per copy, drawn from the Boltzmann law over all N! assignments,
    p(perm | s) proportional to exp(-cost(perm, s) / temperature) (`assignment_costs`): near-ties between assignments
    give a multimodal, coordinated joint choice; once the agents move, the chosen assignment gets cheaper and the
    choice settles. obs: (E, N, O) -> (E, N) landmark indices."""
    perms = _assignments(obs.shape[1])
    logits = -assignment_costs(obs, perms) / temperature
    p = np.exp(logits - logits.max(1, keepdims=True))
    u = rng.random((len(obs), 1)) * p.sum(1, keepdims=True)
    return perms[(p.cumsum(1) > u).argmax(1)]


def spread_controller(obs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Each agent steers to its target landmark with a PD law. obs: (E, N, O), targets: (E, N) landmark indices ->
    forces (E, N, 2): u = kp * (landmark - position) - kd * velocity, shrunk to norm <= 1 (its direction kept)."""
    e, n, _ = obs.shape
    landmarks = obs[..., 4 : 4 + 2 * n].reshape(e, n, n, 2)
    rel = np.take_along_axis(landmarks, targets[..., None, None], axis=2)[:, :, 0]
    u = _KP * rel - _KD * obs[..., 0:2]
    return u / np.maximum(1.0, np.linalg.norm(u, axis=-1, keepdims=True))


def _behaviour(quality: str, temperature: float, rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
    if quality not in SPREAD_QUALITIES:
        raise ValueError(f"quality: expected one of {SPREAD_QUALITIES}, got {quality!r}")
    if not temperature > 0:
        raise ValueError(f"temperature: expected a positive temperature, got {temperature}")

    def policy(obs: np.ndarray) -> np.ndarray:
        if quality == "random":
            return rng.uniform(-1.0, 1.0, size=(*obs.shape[:2], 2))
        a = spread_controller(obs, sample_assignment(obs, temperature, rng))
        return np.clip(a + _NOISE[quality] * rng.standard_normal(a.shape), -1.0, 1.0)

    return policy


def collect_spread(
    quality: str,
    n_transitions: int,
    *,
    seed: int,
    n_agents: int = 3,
    temperature: float = 0.05,
    n_envs: int = 16,
    max_cycles: int = 25,
) -> OfflineDataset:
    """Offline simple_spread data, (T, N, ...) with the team reward, from scripted behaviour of `quality`: "expert"
    and "medium" draw a joint landmark assignment at every step (`sample_assignment` at `temperature`), follow
    `spread_controller` and add action noise of std 0.05 / 0.3; "random" acts uniformly. Whole episodes are
    collected in `n_envs` copies, then cut to `n_transitions`."""
    if isinstance(n_transitions, bool) or not isinstance(n_transitions, int) or n_transitions < 1:
        raise ValueError(f"n_transitions: expected a positive int, got {n_transitions!r}")
    rng = np.random.default_rng(seed)
    policy = _behaviour(quality, temperature, rng)
    envs = SpreadEnvs(n_envs, n_agents=n_agents, max_cycles=max_cycles)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in TRANSITION_FIELDS}
    total, episode = 0, 0
    while total < n_transitions:
        obs = envs.reset(seed * 1_000_003 + episode + np.arange(n_envs))
        episode += n_envs
        done = np.zeros(n_envs, bool)
        while not done.all():
            a = policy(obs)
            step = envs.step(a)
            row = (obs, a, step.rewards, step.observations, step.terminated, step.truncated)
            for k, v in zip(cols, row, strict=True):
                cols[k].append(v)
            total += n_envs
            obs = step.observations
            done = step.terminated | step.truncated
    envs.close()
    return OfflineDataset.from_rollout(cols, n_transitions)


def evaluate_spread(
    act: Callable[[torch.Tensor], torch.Tensor],
    *,
    n_episodes: int,
    seed: int,
    n_agents: int = 3,
    max_cycles: int = 25,
) -> np.ndarray:
    """Undiscounted team returns of `n_episodes` episodes run side by side, one batched policy call per step for
    all of them. act: observations (E, N, O) -> forces (E, N, 2). Returns (n_episodes,)."""
    envs = SpreadEnvs(n_episodes, n_agents=n_agents, max_cycles=max_cycles)
    obs = envs.reset(seed * 1_000_003 + 500_000 + np.arange(n_episodes))
    totals = np.zeros(n_episodes)
    done = np.zeros(n_episodes, bool)
    while not done.all():
        a = act(torch.as_tensor(obs)).detach().cpu().numpy()
        step = envs.step(a)
        totals += ~done * step.rewards
        obs, done = step.observations, done | step.terminated | step.truncated
    envs.close()
    return totals


@dataclass(frozen=True)
class SpreadData(Config):
    """The offline simple_spread data sets several runs share: `n_transitions` of every quality for `n_agents`
    agents at assignment `temperature`, collected with `seed` (`collect_spread`) by the installed `mpe2` version."""

    n_agents: int = 3
    n_transitions: int = 100_000
    temperature: float = 0.05
    seed: int = 0
    mpe2: str = field(default_factory=lambda: version("mpe2"))


def _build_spread_data(config: SpreadData, folder: Path) -> None:
    for quality in SPREAD_QUALITIES:
        data = collect_spread(
            quality, config.n_transitions, seed=config.seed, n_agents=config.n_agents, temperature=config.temperature
        )
        data.save(folder / f"{quality}.npz")


def spread_data_artifact(config: SpreadData) -> Artifact:
    """The cached artifact "rl.spread_datasets" of `config`: one npz per quality."""
    seconds = 6.6e-4 * config.n_transitions * config.n_agents  # measured: 25 s for 3 x 20k at N = 2 on 2 cores
    return Artifact(
        "rl.spread_datasets",
        _build_spread_data,
        config,
        expected_seconds=seconds,
        description="offline MPE simple_spread data sets (expert, medium, random)",
    )


def spread_dataset(config: SpreadData, quality: str) -> OfflineDataset:
    """The `quality` data set of `config`, built once into the artifact cache and loaded (checked) from it."""
    if quality not in SPREAD_QUALITIES:
        raise ValueError(f"quality: expected one of {SPREAD_QUALITIES}, got {quality!r}")
    return load_dataset(ensure(spread_data_artifact(config)).path / f"{quality}.npz")
