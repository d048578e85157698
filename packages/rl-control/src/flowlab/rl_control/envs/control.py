"""Gymnasium environments for offline data: a one-line error for unknown ids, a stochastic Pendulum (reward and
action noise), scripted behaviour policies at several qualities, a vectorised collector and a batched evaluator.

Actions are normalised to [-1, 1] everywhere and rescaled to the environment's box when stepping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from flowlab.rl_control.data import TRANSITION_FIELDS, OfflineDataset
from flowlab.rl_control.envs.names import QUALITIES

__all__ = [
    "CONTROLLERS",
    "QUALITIES",
    "NoiseSpec",
    "collect",
    "energy_controller",
    "evaluate_policy",
    "make_vector_env",
    "noisy_step",
    "reacher_controller",
    "scripted_controller",
    "to_box",
]


@dataclass(frozen=True)
class NoiseSpec:
    """Stochasticity added on top of the environment: Gaussian reward noise (std) and action noise (std, in
    normalised action units) applied to the executed action."""

    reward_std: float = 0.5
    action_std: float = 0.1


def make_vector_env(env_id: str, n_envs: int, *, max_episode_steps: int | None = None) -> gym.vector.VectorEnv:
    """`n_envs` synchronous copies of `env_id` without autoreset (callers reset finished copies with
    `reset(options={"reset_mask": done})`); an unknown id raises a one-line ValueError."""
    if n_envs < 1:
        raise ValueError(f"n_envs: expected >= 1, got {n_envs}")
    try:
        env = gym.make_vec(
            env_id,
            num_envs=n_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED},
            **({"max_episode_steps": max_episode_steps} if max_episode_steps else {}),
        )
    except gym.error.Error as err:
        raise ValueError(
            f"env: unknown or unavailable gymnasium environment id {env_id!r} ({type(err).__name__})"
        ) from None
    if not isinstance(env.single_action_space, gym.spaces.Box):
        env.close()
        raise ValueError(f"env: {env_id!r} has a non-continuous action space; only Box actions are supported")
    return env


def check_dataset_spaces(obs_dim: int, act_dim: int, env_id: str) -> None:
    """Raise a one-line ValueError unless a dataset of `obs_dim`-D observations and `act_dim`-D actions fits the
    spaces of `env_id` (checked before training, not at the first evaluation)."""
    env = make_vector_env(env_id, 1)
    try:
        want = (int(np.prod(env.single_observation_space.shape)), int(np.prod(env.single_action_space.shape)))
    finally:
        env.close()
    if (obs_dim, act_dim) != want:
        raise ValueError(
            f"dataset: {obs_dim}-D observations and {act_dim}-D actions, but {env_id} has {want[0]}-D "
            f"observations and {want[1]}-D actions (collect the data with --env for this environment)"
        )


def energy_controller(obs: np.ndarray) -> np.ndarray:
    """Pendulum-v1 swing-up by energy shaping plus a PD stabiliser near the top. obs: (N, 3) -> actions (N, 1) in
    [-1, 1] (torque / 2). With theta = 0 upright, theta'' = 15 sin(theta) + 3 u, so E = theta'^2 / 2 + 15 cos(theta)
    is 15 at the upright rest and dE/dt = 3 u theta'."""
    cos, sin, vel = obs[:, 0], obs[:, 1], obs[:, 2]
    theta = np.arctan2(sin, cos)
    energy = 0.5 * vel**2 + 15.0 * cos
    swing = 0.5 * (15.0 - energy) * np.sign(vel + 1e-6)
    pd = -(10.0 * theta + 2.0 * vel)
    torque = np.where(cos > 0.8, pd, swing)
    return np.clip(torque / 2.0, -1.0, 1.0)[:, None]


def reacher_controller(obs: np.ndarray) -> np.ndarray:
    """Reacher-v5 by Jacobian-transpose control: tau = 100 J(q)^T (target - fingertip) - 0.3 q', clipped to
    [-1, 1], for the two links of 0.1 and 0.11 m. obs: (N, 10) = [cos q, sin q, target, q', fingertip - target]
    -> actions (N, 2). Mean return about -6.6 over 20 episodes (uniform random actions: about -43)."""
    c1, c2, s1, s2 = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
    c12, s12 = c1 * c2 - s1 * s2, s1 * c2 + c1 * s2
    ex, ey = -obs[:, 8], -obs[:, 9]
    tau1 = (-0.1 * s1 - 0.11 * s12) * ex + (0.1 * c1 + 0.11 * c12) * ey
    tau2 = -0.11 * s12 * ex + 0.11 * c12 * ey
    return np.clip(100.0 * np.stack([tau1, tau2], 1) - 0.3 * obs[:, 6:8], -1.0, 1.0)


#: scripted controllers by environment family: the behaviour policies' base and the 100 mark of normalised returns
CONTROLLERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Pendulum": energy_controller,
    "Reacher": reacher_controller,
}


def scripted_controller(env_id: str) -> Callable[[np.ndarray], np.ndarray]:
    """The scripted controller for `env_id` (matched by family name, e.g. Reacher-v5 -> Reacher)."""
    family = env_id.split("-")[0]
    if family not in CONTROLLERS:
        raise ValueError(
            f"env: no scripted controller for {env_id!r} (have {sorted(CONTROLLERS)}); use quality 'random'"
        )
    return CONTROLLERS[family]


def _behaviour(
    quality: str, act_dim: int, rng: np.random.Generator, controller: Callable[[np.ndarray], np.ndarray] | None
) -> Callable[[np.ndarray], np.ndarray]:
    if quality not in QUALITIES:
        raise ValueError(f"quality: expected one of {QUALITIES}, got {quality!r}")

    def policy(obs: np.ndarray) -> np.ndarray:
        n = obs.shape[0]
        rand = rng.uniform(-1, 1, size=(n, act_dim))
        if quality == "random":
            return rand
        a = controller(obs)
        if quality == "medium":
            a = a + 0.3 * rng.standard_normal(a.shape)
        elif quality == "mixed":
            a = np.where(rng.random((n, 1)) < 0.5, a, rand)
        return np.clip(a, -1, 1)

    return policy


def to_box(actions: np.ndarray, space: gym.spaces.Box) -> np.ndarray:
    """Normalised actions (..., A) in [-1, 1] -> the Box `space` of shape (A,): low + (a + 1) (high - low) / 2, in
    the space's dtype."""
    return (space.low + (np.asarray(actions) + 1) * 0.5 * (space.high - space.low)).astype(space.dtype)


def noisy_step(env: gym.vector.VectorEnv, actions: np.ndarray, noise: NoiseSpec, rng: np.random.Generator):
    """Step every copy with normalised actions (N, A) plus action noise, rescaled to the box; rewards get the
    reward noise. Returns next observations (N, O), rewards (N,), terminated (N,), truncated (N,)."""
    executed = np.clip(actions + noise.action_std * rng.standard_normal(actions.shape), -1, 1)
    obs, rew, term, trunc, _ = env.step(to_box(executed, env.single_action_space))
    return obs, rew + noise.reward_std * rng.standard_normal(rew.shape), term, trunc


def collect(
    env_id: str,
    quality: str,
    n_transitions: int,
    *,
    seed: int,
    n_envs: int = 20,
    noise: NoiseSpec = NoiseSpec(),
    max_episode_steps: int | None = None,
) -> OfflineDataset:
    """Roll out a behaviour policy of `quality` ("expert" | "medium" | "mixed" | "random") in `n_envs` vectorised
    copies. The first three build on the environment's scripted controller (`CONTROLLERS`: Pendulum, Reacher);
    other environments support "random" only."""
    if n_transitions < 1:
        raise ValueError(f"n_transitions: expected >= 1, got {n_transitions}")
    controller = None if quality == "random" else scripted_controller(env_id)
    env = make_vector_env(env_id, n_envs, max_episode_steps=max_episode_steps)
    rng = np.random.default_rng(seed)
    policy = _behaviour(quality, env.single_action_space.shape[0], rng, controller)
    obs, _ = env.reset(seed=seed)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in TRANSITION_FIELDS}
    total = 0
    while total < n_transitions:
        a = policy(obs)
        obs2, r, term, trunc = noisy_step(env, a, noise, rng)
        for k, v in zip(cols, (obs, a, r, obs2, term, trunc), strict=True):
            cols[k].append(np.asarray(v))
        total += n_envs
        obs = obs2
        done = term | trunc
        if np.any(done):
            obs, _ = env.reset(options={"reset_mask": done})
    env.close()
    return OfflineDataset.from_rollout(cols, n_transitions)


def evaluate_policy(
    env_id: str,
    act: Callable[[torch.Tensor], torch.Tensor] | Callable[[np.ndarray], np.ndarray],
    *,
    n_episodes: int,
    seed: int,
    noise: NoiseSpec = NoiseSpec(reward_std=0.0),
    torch_policy: bool = True,
) -> np.ndarray:
    """Undiscounted returns of `n_episodes` episodes run in parallel, one batched policy call per step for all
    environments. act: observations (N, O) -> normalised actions (N, A). Returns (n_episodes,)."""
    env = make_vector_env(env_id, n_episodes)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    totals = np.zeros(n_episodes)
    alive = np.ones(n_episodes, dtype=bool)
    while alive.any():
        if torch_policy:
            a = act(torch.as_tensor(obs, dtype=torch.float32)).cpu().numpy()
        else:
            a = act(obs)
        obs, r, term, trunc = noisy_step(env, a, noise, rng)
        totals += alive * r
        alive &= ~(term | trunc)
    env.close()
    return totals
