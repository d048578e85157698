"""`rl.value_flows.online`: offline training, then offline-to-online fine-tuning in the noisy Pendulum with a
growing replay buffer (`OnlineReplay`): normalised return after each phase and the online episodes' mean return."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from flowlab.core.bench import BenchContext, BenchResult, Scenario, torch_threads
from flowlab.rl_control.envs.control import collect
from flowlab.rl_control.value_flows.agents import train_agent
from flowlab.rl_control.value_flows.benchmarks.common import (
    GYM_AGENT,
    GYM_SIZES,
    GymBench,
    agent_rows,
    reference_returns,
    score,
    train_offline,
)
from flowlab.rl_control.value_flows.online import OnlineReplay

__all__ = ["ONLINE", "OnlineBench"]


@dataclass(frozen=True)
class OnlineBench(GymBench):
    """After offline training, `online_steps` fine-tuning steps, each one step of `n_envs` environment copies, whose
    episodes end after `max_episode_steps` (None: the environment's own limit, 200 steps on Pendulum)."""

    online_steps: int
    n_envs: int
    max_episode_steps: int | None = None


def run_online(ctx: BenchContext) -> BenchResult:
    """Offline training, then offline-to-online fine-tuning in the noisy environment (`OnlineReplay`): normalised
    return after each phase, and the mean return of the online episodes."""
    cfg: OnlineBench = ctx.config
    table: dict[str, dict[str, float]] = {}
    with torch_threads(1):
        marks = reference_returns(cfg.env, cfg.eval_episodes, ctx.seed)
        seed = ctx.seed * 100
        data = collect(cfg.env, cfg.quality, cfg.n_transitions, seed=seed)
        for row in cfg.agents:
            t0 = time.perf_counter()
            agent = train_offline(ctx, data, seed, row)
            offline = score(ctx, agent, seed, marks)
            replay = OnlineReplay(
                data, agent, cfg.env, steps=cfg.online_steps, seed=seed + 3, n_envs=cfg.n_envs,
                max_episode_steps=cfg.max_episode_steps,
            )  # fmt: skip
            train_agent(
                agent,
                replay,
                steps=cfg.online_steps,
                batch_size=cfg.batch_size,
                reward_scale=data.reward_scale(),
                generator=torch.Generator().manual_seed(seed + 5),
                device=ctx.device,
            )
            replay.close()
            table[row.name] = {
                "norm_return_offline": offline,
                "norm_return_online": score(ctx, agent, seed, marks),
                "online_episode_return": float(np.mean(replay.episode_returns)) if replay.episode_returns else math.nan,
                "wall_s": time.perf_counter() - t0,
            }
    ours = table.pop("value_flows")
    return BenchResult(metrics=ours, baselines=table)


_FULL = OnlineBench(
    **GYM_SIZES["full"],
    quality="mixed",
    agents=agent_rows(
        GYM_AGENT["full"],
        (
            ("value_flows", {"method": "value_flows"}),
            ("value_flows_onestep", {"method": "value_flows", "policy_extraction": "onestep", "alpha": 30.0}),
            ("fql", {"method": "td", "policy_extraction": "onestep", "alpha": 30.0}),
        ),
    ),
    online_steps=50_000,
    n_envs=1,
)
_QUICK = replace(
    _FULL,
    **GYM_SIZES["quick"],
    agents=agent_rows(
        GYM_AGENT["quick"],
        (("value_flows", {"method": "value_flows"}), ("fql", {"method": "td", "policy_extraction": "onestep"})),
    ),
    online_steps=1000,
    n_envs=2,
)
#: toy size (the code path, not quality): 10 offline steps, then 40 online ones in episodes of 20 steps (an online
#: phase that finishes no episode reports a NaN mean episode return)
_SMOKE = replace(
    _QUICK,
    n_transitions=1000,
    steps=10,
    batch_size=64,
    eval_episodes=2,
    online_steps=40,
    n_envs=1,
    max_episode_steps=20,
)

ONLINE = Scenario(
    name="rl.value_flows.online",
    package="rl",
    method="value_flows",
    run=run_online,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    directions={
        "norm_return_offline": "max",
        "norm_return_online": "max",
        "online_episode_return": "max",
        "wall_s": "min",
    },
    description="Offline-to-online Pendulum (mixed data, reward noise 0.5, action noise 0.1): normalised return after "
    "offline training and after online fine-tuning with a growing replay buffer.",
    expected_seconds={"smoke": 6, "quick": 100, "full": 4000},  # full: a guess (3 agents x 100k steps in turn)
)
