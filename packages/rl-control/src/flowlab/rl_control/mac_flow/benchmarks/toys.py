"""`rl.mac_flow.toys`: the four two-agent coordination games (`envs/coordination`). Per game: every learner's mean
return, W2 from joint samples to the product of their marginals (how much the agents coordinate), the joint flow's
error in the behaviour's mode weights, and the value-gap bound |V_joint - V_fact| <= L_Q W2 between the joint flow and
MAC-Flow's decentralised policies (L_Q by finite differences)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from flowlab.core.bench import BenchContext, BenchResult, Scenario, figure, parallel_map
from flowlab.core.config import Config
from flowlab.rl_control.envs.coordination import GAMES, game, game_dataset
from flowlab.rl_control.mac_flow.benchmarks.common import OURS, LearnerRow, check_rows, learner_rows, train_row
from flowlab.rl_control.mac_flow.evaluate import lipschitz_estimate, mode_weights, product_w2, value_gap
from flowlab.rl_control.mac_flow.model import MARLConfig

__all__ = ["TOYS", "ToysBench"]


@dataclass(frozen=True)
class ToysBench(Config):
    """Each of `games` with `n_transitions` behaviour samples; every row of `agents` trains `steps` steps of
    `batch_size` per stage and draws `n_eval` joint actions; the (game, row) jobs run in up to `workers` processes."""

    games: tuple[str, ...]
    n_transitions: int
    steps: int
    batch_size: int
    n_eval: int
    agents: tuple[LearnerRow, ...]
    workers: int

    def __post_init__(self) -> None:
        super().__post_init__()
        check_rows(self.agents)
        for name in self.games:
            game(name)


def _toy_job(ctx: BenchContext, name: str, row: LearnerRow) -> dict[str, torch.Tensor]:
    """Train one row on one game and draw its joint actions: {row name (and "joint_flow"): (n_eval, 2, 2)}. Seeded
    from ctx.seed, the game and the row alone, so it gives the same numbers in any process."""
    cfg: ToysBench = ctx.config
    torch.set_num_threads(1)
    data_seed = ctx.seed * 100 + sorted(GAMES).index(name)
    data = game_dataset(name, cfg.n_transitions, seed=data_seed)
    learners = train_row(row, data, seed=data_seed, steps=cfg.steps, batch_size=cfg.batch_size, device=ctx.device)
    obs = torch.zeros(cfg.n_eval, data.n_agents, data.obs_dim, device=ctx.device)
    gen = torch.Generator().manual_seed(data_seed + 1)
    return {k: agent.act(obs, generator=gen).cpu() for k, agent in learners.items()}


def _plot(ctx: BenchContext, samples: dict[str, dict[str, torch.Tensor]]):
    """Agent 1's first action coordinate against agent 2's, per game (columns) for the data, the joint flow and
    MAC-Flow (rows): coordination shows as structure a product of marginals would not have."""
    rows = ("data", "joint_flow", OURS)
    path = ctx.out_dir / "mac_flow_toys.png"
    with figure(path, ncols=len(samples), nrows=len(rows), size=(3.0 * len(samples), 8.4), squeeze=False) as (_, ax):
        for j, (name, by_row) in enumerate(samples.items()):
            for i, row in enumerate(rows):
                a = by_row[row][:1000]
                ax[i, j].scatter(a[:, 0, 0], a[:, 1, 0], s=2, alpha=0.4)
                ax[i, j].set(xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), title=f"{name}: {row}")
                ax[i, j].set(xlabel="agent 1, a_x", ylabel="agent 2, a_x")
    return path


def run_toys(ctx: BenchContext) -> BenchResult:
    cfg: ToysBench = ctx.config
    jobs = [(name, row) for name in cfg.games for row in cfg.agents]
    n = len(jobs)
    outs = parallel_map(_toy_job, [replace(ctx, generator=None)] * n, *zip(*jobs, strict=True), workers=cfg.workers)
    gen = torch.Generator().manual_seed(ctx.seed * 1000 + 7)
    samples: dict[str, dict[str, torch.Tensor]] = {name: {} for name in cfg.games}
    for (name, _), out in zip(jobs, outs, strict=True):
        samples[name].update(out)
    ours: dict[str, float] = {}
    table: dict[str, dict[str, float]] = {}
    for name in cfg.games:
        g = game(name)
        data = torch.as_tensor(game_dataset(name, cfg.n_eval, seed=ctx.seed * 100 + 50).actions)
        samples[name]["data"] = data
        for row, acts in samples[name].items():
            dest = ours if row == OURS else table.setdefault(row, {})
            dest[f"{name}/return"] = float(g.payoff(acts.double()).mean())
            if row in (OURS, "joint_flow", "data"):
                dest[f"{name}/product_w2"] = product_w2(acts, generator=gen)
        if g.modes is not None:
            error = (mode_weights(samples[name]["joint_flow"], g.modes) - g.weights.double()).abs().max()
            table["joint_flow"][f"{name}/mode_weight_error"] = float(error)
        lq = lipschitz_estimate(g.payoff, (g.n_agents, g.act_dim), generator=gen)
        gap = value_gap(g.payoff, samples[name]["joint_flow"], samples[name][OURS], lq)
        ours.update(
            {
                f"{name}/value_gap": gap.gap,
                f"{name}/w2_to_joint_flow": gap.w2,
                f"{name}/lipschitz": lq,
                f"{name}/gap_bound": gap.lipschitz * gap.w2,
                f"{name}/bound_holds": float(gap.holds),
            }
        )
    ours["bound_holds_all"] = float(all(ours[f"{name}/bound_holds"] for name in cfg.games))
    return BenchResult(metrics=ours, baselines=table, plots=[_plot(ctx, samples)])


_AGENTS = (
    (OURS, {"method": "mac_flow"}),
    ("gaussian_bc", {"method": "gaussian_bc"}),
    ("independent_bc", {"method": "independent_bc"}),
    ("matd3bc", {"method": "matd3bc"}),
    ("diffusion_bc", {"method": "diffusion_bc"}),
)
_FULL_AGENT = MARLConfig(hidden=(128, 128), lr=3e-4, gamma=0.0)
_QUICK_AGENT = replace(_FULL_AGENT, hidden=(64, 64), lr=1e-3)
_FULL = ToysBench(
    games=tuple(sorted(GAMES)),
    n_transitions=20_000,
    steps=20_000,
    batch_size=256,
    n_eval=5000,
    agents=learner_rows(
        _FULL_AGENT, (*_AGENTS, ("mac_flow_per_agent", {"method": "mac_flow", "bc_flow": "per_agent"}))
    ),
    workers=2,
)
_QUICK = replace(_FULL, n_transitions=10_000, steps=1500, n_eval=1000, agents=learner_rows(_QUICK_AGENT, _AGENTS))
_SMOKE = replace(_QUICK, n_transitions=500, steps=10, batch_size=64, n_eval=200, workers=1)

_DIRECTIONS = {f"{name}/return": "max" for name in GAMES} | {f"{name}/mode_weight_error": "min" for name in GAMES}

TOYS = Scenario(
    name="rl.mac_flow.toys",
    package="rl",
    method="mac_flow",
    run=run_toys,
    variants={"smoke": _SMOKE, "quick": _QUICK, "full": _FULL},
    directions=_DIRECTIONS,
    description="Two-agent coordination games (matrix, quadratic, ring, xor): return of MAC-Flow, the joint flow "
    "and the BC/TD3+BC/diffusion baselines, W2 to the product of marginals, the value-gap bound.",
    expected_seconds={"smoke": 10, "quick": 150, "full": 3600},  # quick: 144-156 s measured; full: a guess
)
