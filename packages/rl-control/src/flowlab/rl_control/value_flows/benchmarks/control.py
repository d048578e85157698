"""`rl.value_flows.control` (offline stochastic Pendulum) and `rl.value_flows.reacher` (offline MuJoCo Reacher-v5):
normalised return of every agent, mean and std over seeds."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from flowlab.core.bench import BenchContext, BenchResult, Claim, Scenario, parallel_map, torch_threads
from flowlab.rl_control.envs.control import collect
from flowlab.rl_control.value_flows.benchmarks.common import (
    GYM_AGENT,
    GYM_SIZES,
    PAPER,
    AgentRow,
    GymBench,
    agent_rows,
    reference_returns,
    score,
    train_offline,
)

__all__ = ["CONTROL", "REACHER", "ControlBench"]


@dataclass(frozen=True)
class ControlBench(GymBench):
    """Every agent on every one of `seeds` datasets, the (seed, agent) jobs in up to `workers` processes."""

    seeds: int
    workers: int


def _control_job(ctx: BenchContext, seed: int, row: AgentRow, marks: tuple[float, float]) -> float:
    """Collect the seed's dataset, train one agent on it and return its normalised return. Everything is seeded
    from `seed` and the row's name, so a job gives the same number in this process or in a worker."""
    cfg: ControlBench = ctx.config
    torch.set_num_threads(1)
    data = collect(cfg.env, cfg.quality, cfg.n_transitions, seed=seed)
    agent = train_offline(ctx, data, seed, row)
    return score(ctx, agent, seed, marks)


def run_control(ctx: BenchContext) -> BenchResult:
    """Every agent on every seed's dataset (seeds ctx.seed * 100 + 0..seeds-1), the (seed, agent) jobs in parallel
    processes (cfg.workers); normalised return mean and std over the seeds."""
    cfg: ControlBench = ctx.config
    with torch_threads(1):
        marks = reference_returns(cfg.env, cfg.eval_episodes, ctx.seed)
    jobs = [(ctx.seed * 100 + s, row) for s in range(cfg.seeds) for row in cfg.agents]
    seeds, rows = zip(*jobs, strict=True)
    n = len(jobs)
    ctx = replace(ctx, generator=None)  # generators do not pickle; each job seeds its own
    scores = parallel_map(_control_job, [ctx] * n, seeds, rows, [marks] * n, workers=cfg.workers)
    per_agent: dict[str, list[float]] = {}
    for row, value in zip(rows, scores, strict=True):
        per_agent.setdefault(row.name, []).append(value)
    table = {
        name: {"norm_return": float(np.mean(v)), "norm_return_std": float(np.std(v))} for name, v in per_agent.items()
    }
    ours = table.pop("value_flows")
    ours.update(random_return=marks[0], controller_return=marks[1])
    return BenchResult(
        metrics=ours,
        baselines=table,
        references={
            k: {kk: v for kk, v in d.items() if kk.startswith("ogbench")}
            for k, d in PAPER.items()
            if "ogbench/cube-double-play" in d
        },
    )


_AGENTS = (
    ("value_flows", {"method": "value_flows"}),
    ("td_fql_style", {"method": "td"}),
    ("iqn", {"method": "iqn"}),
    ("value_flows_no_conf", {"method": "value_flows", "use_confidence": False}),
    ("value_flows_no_dcfm", {"method": "value_flows", "lambda_d": 0.0}),
    ("fql", {"method": "td", "policy_extraction": "onestep"}),
    ("value_flows_onestep", {"method": "value_flows", "policy_extraction": "onestep"}),
)

_FULL = ControlBench(
    **GYM_SIZES["full"], quality="medium", agents=agent_rows(GYM_AGENT["full"], _AGENTS), seeds=3, workers=2
)
_QUICK = replace(_FULL, **GYM_SIZES["quick"], agents=agent_rows(GYM_AGENT["quick"], _AGENTS[:5]))
#: toy size (the code path, not quality): every quick agent, one seed, 10 steps, in this process
_SMOKE = replace(_QUICK, n_transitions=1000, steps=10, batch_size=64, eval_episodes=2, seeds=1, workers=1)

CONTROL = Scenario(
    name="rl.value_flows.control",
    package="rl",
    method="value_flows",
    run=run_control,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    directions={"norm_return": "max", "norm_return_std": "min"},
    description="Offline stochastic Pendulum (reward noise 0.5, action noise 0.1): normalised return (0 random, "
    "100 energy-shaping controller).",
    expected_seconds={"smoke": 5, "quick": 500, "full": 8000},  # full: a guess (21 jobs x 50k steps, 2 processes)
)

REACHER = Scenario(
    name="rl.value_flows.reacher",
    package="rl",
    method="value_flows",
    run=run_control,
    variants={
        "smoke": replace(_SMOKE, env="Reacher-v5", agents=_SMOKE.agents[:2]),
        "quick": replace(_QUICK, env="Reacher-v5", seeds=1, agents=agent_rows(GYM_AGENT["quick"], _AGENTS[:2])),
        "full": replace(_FULL, env="Reacher-v5"),
    },
    directions={"norm_return": "max", "norm_return_std": "min"},
    description="Offline MuJoCo Reacher-v5 with reward noise 0.5 and action noise 0.1 (data from a noisy "
    "Jacobian-transpose controller): normalised return (0 random, 100 the controller).",
    # quick: 19-27 s measured (2026-12-06); full: a guess, as control's
    expected_seconds={"smoke": 3, "quick": 25, "full": 8000},
    headline=True,
    claim=Claim(
        "Value Flows' distributional critic at least matches the scalar TD critic behind the same actor",
        "norm_return",
        ">=",
        1.0,
        baseline="td_fql_style",
    ),
)
