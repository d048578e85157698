"""What the Value Flows scenarios share: a table row (`AgentRow`), the paper's numbers, per-agent seeds, and the
gymnasium pieces of the control and online scenarios (`GymBench`, reference returns, offline training, scoring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch

from flowlab.core.bench import BenchContext, name_seed
from flowlab.core.config import Config
from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.envs.control import evaluate_policy, make_vector_env, scripted_controller
from flowlab.rl_control.envs.scores import normalised_return
from flowlab.rl_control.value_flows.agents import AgentConfig, make_agent, train_agent

__all__ = [
    "GYM_AGENT",
    "GYM_SIZES",
    "PAPER",
    "AgentRow",
    "GymBench",
    "agent_rows",
    "check_rows",
    "reference_returns",
    "score",
    "train_offline",
]

PAPER = {
    "Value Flows [unverified]": {"w1": 0.02, "ogbench/cube-double-play": 69.0, "ogbench/puzzle-3x3-play": 87.0},
    "C51 [unverified]": {"w1": 0.09},
    "CODAC [unverified]": {"w1": 0.06},
    "FQL [unverified]": {"ogbench/cube-double-play": 29.0, "ogbench/puzzle-3x3-play": 30.0},
}


@dataclass(frozen=True)
class AgentRow(Config):
    """One row of a scenario's table: its `name` ("value_flows" is ours, the others baselines) and the agent."""

    name: str
    agent: AgentConfig


def agent_rows(base: AgentConfig, specs: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[AgentRow, ...]:
    """One row per (name, fields) of `specs`: `base` with those fields replaced (`method` among them)."""
    return tuple(AgentRow(name, replace(base, **fields)) for name, fields in specs)


def check_rows(rows: Sequence[AgentRow]) -> None:
    """A table needs distinct row names, one of them "value_flows" (ours)."""
    names = [row.name for row in rows]
    if "value_flows" not in names or len(set(names)) != len(names):
        raise ValueError(f"agents: expected distinct row names including 'value_flows', got {names}")


@dataclass(frozen=True)
class GymBench(Config):
    """Offline data from a gymnasium environment: `n_transitions` of behaviour `quality` in `env` (reward noise 0.5,
    action noise 0.1); every agent of `agents` trains `steps` steps of `batch_size`; policies are scored over
    `eval_episodes` parallel episodes."""

    env: str
    quality: Literal["expert", "medium", "mixed", "random"]
    n_transitions: int
    steps: int
    batch_size: int
    eval_episodes: int
    agents: tuple[AgentRow, ...]

    def __post_init__(self) -> None:
        super().__post_init__()
        check_rows(self.agents)


#: what every gymnasium scenario shares, by variant (Reacher overrides the env): sizes and the agents' settings
GYM_SIZES = {
    "full": {"env": "Pendulum-v1", "n_transitions": 100_000, "steps": 50_000, "batch_size": 256, "eval_episodes": 20},
    "quick": {"env": "Pendulum-v1", "n_transitions": 20_000, "steps": 500, "batch_size": 128, "eval_episodes": 10},
}
_FULL_AGENT = AgentConfig(hidden=(128, 128), lr=3e-4, gamma=0.99, num_action_samples=16)
GYM_AGENT = {
    "full": _FULL_AGENT,
    "quick": replace(_FULL_AGENT, hidden=(64, 64), lr=1e-3, gamma=0.97, num_action_samples=8),
}


def reference_returns(env_id: str, n_episodes: int, seed: int) -> tuple[float, float]:
    """Mean returns of the uniform random policy and of the scripted controller (the 0 and 100 marks)."""
    probe = make_vector_env(env_id, 1)
    act_dim = probe.single_action_space.shape[0]
    probe.close()
    rng = np.random.default_rng(seed)
    random_ret = evaluate_policy(
        env_id,
        lambda o: rng.uniform(-1, 1, (len(o), act_dim)),
        n_episodes=n_episodes,
        seed=seed + 7,
        torch_policy=False,
    ).mean()
    controller = scripted_controller(env_id)
    ref_ret = evaluate_policy(env_id, controller, n_episodes=n_episodes, seed=seed + 7, torch_policy=False)
    return float(random_ret), float(ref_ret.mean())


def score(ctx: BenchContext, agent, seed: int, marks: tuple[float, float]) -> float:
    """Normalised return of the agent's policy over cfg.eval_episodes parallel episodes of cfg.env."""
    cfg: GymBench = ctx.config
    g = torch.Generator().manual_seed(seed + 1)
    rets = evaluate_policy(
        cfg.env,
        lambda o: agent.act(o.to(ctx.device), generator=g),
        n_episodes=cfg.eval_episodes,
        seed=seed + 11,
    )
    return float(normalised_return(rets.mean(), *marks))


def train_offline(ctx: BenchContext, data: OfflineDataset, seed: int, row: AgentRow):
    """The row's agent, built from its own seed for `data` (rewards normalised by the data's scale) and trained
    offline on it for cfg.steps steps."""
    cfg: GymBench = ctx.config
    r = data.rewards / data.reward_scale()
    agent = make_agent(
        row.agent,
        obs_dim=data.obs_dim,
        act_dim=data.act_dim,
        reward_range=(float(r.min()), float(r.max())),
        seed=name_seed(seed, row.name),
    )
    train_agent(
        agent,
        data,
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        reward_scale=data.reward_scale(),
        generator=torch.Generator().manual_seed(seed),
        device=ctx.device,
    )
    return agent
