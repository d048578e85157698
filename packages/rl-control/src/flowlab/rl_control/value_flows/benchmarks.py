"""Benchmarks: `rl.value_flows.chain` (return-distribution accuracy against Monte-Carlo truth on the chain MDP) and
`rl.value_flows.control` (offline Pendulum with reward and action noise, normalised return)."""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, Scenario, torch_threads
from flowlab.rl_control.value_flows.agents import AgentConfig, make_agent, train_agent
from flowlab.rl_control.value_flows.chain import ChainMDP
from flowlab.rl_control.value_flows.envs import collect, energy_controller, evaluate_policy, normalised_return
from flowlab.rl_control.value_flows.evaluate import distribution_scores, spearman

__all__ = ["CHAIN", "CONTROL", "SCENARIOS"]

_PAPER = {
    "Value Flows [unverified]": {"w1": 0.02, "ogbench/cube-double-play": 69.0, "ogbench/puzzle-3x3-play": 87.0},
    "C51 [unverified]": {"w1": 0.09},
    "CODAC [unverified]": {"w1": 0.06},
    "FQL [unverified]": {"ogbench/cube-double-play": 29.0, "ogbench/puzzle-3x3-play": 30.0},
}


def _seeded(ctx: BenchContext, offset: int) -> torch.Generator:
    return torch.Generator().manual_seed(ctx.seed * 1000 + offset)


def _init_seed(seed: int, name: str) -> int:
    """Network-initialisation seed of agent `name`: the same whichever agents run before it."""
    return seed * 1000 + zlib.crc32(name.encode()) % 1000


def run_chain(ctx: BenchContext) -> BenchResult:
    cfg: Mapping[str, Any] = ctx.config
    with torch_threads(1):
        mdp = ChainMDP()
        data = mdp.collect(int(cfg["n_transitions"]), generator=_seeded(ctx, 1))
        pos, act = mdp.grid(int(cfg["n_grid_actions"]))
        truth = mdp.monte_carlo_returns(pos, act, int(cfg["n_rollouts"]), generator=_seeded(ctx, 2))
        true_std = truth.std(1).float()
        obs, a = mdp.observe(pos).to(ctx.device), act[:, None].to(ctx.device)
        lo, hi = mdp.reward_range
        results, curves = {}, {}
        for name, method, overrides in cfg["agents"]:
            config = AgentConfig(
                method=method,
                obs_dim=mdp.obs_dim,
                act_dim=1,
                r_min=lo,
                r_max=hi,
                gamma=mdp.gamma,
                v_range=(lo / (1 - mdp.gamma), hi),
                hidden=tuple(cfg["hidden"]),
                lr=float(cfg["lr"]),
                tau=float(cfg["tau"]),
                next_action="dataset",
                **overrides,
            )
            agent = make_agent(config, seed=_init_seed(ctx.seed, name))
            t0 = time.perf_counter()
            fitres = train_agent(
                agent,
                data,
                steps=int(cfg["steps"]),
                batch_size=int(cfg["batch_size"]),
                generator=_seeded(ctx, 3),
                device=ctx.device,
            )
            train_s = time.perf_counter() - t0
            g = _seeded(ctx, 4)
            with torch.no_grad():
                samples = agent.sample_returns(obs, a, int(cfg["n_model_samples"]), generator=g).cpu()
                scores = distribution_scores(samples, truth)
                m = {"w1": scores.w1, "mean_abs_error": scores.mean_abs_error, "train_s": train_s}
                if method == "value_flows":
                    m["spearman_spread_1eps"] = spearman(agent.spread(obs, a, generator=g).cpu(), true_std)
                    m["spearman_spread_64eps"] = spearman(agent.spread(obs, a, generator=g, n_eps=64).cpu(), true_std)
                m["spearman_sample_std"] = spearman(samples.std(1), true_std)
            results[name] = m
            curves[name] = ([h["step"] for h in fitres.history], [float(h["loss"]) for h in fitres.history])
    ours = results.pop("value_flows")
    return BenchResult(
        metrics=ours,
        baselines=results,
        references={k: {kk: v for kk, v in d.items() if kk == "w1"} for k, d in _PAPER.items() if "w1" in d},
        curves=[Curve("chain MDP training loss", "step", "loss", curves, logy=False)],
    )


def run_control(ctx: BenchContext) -> BenchResult:
    cfg: Mapping[str, Any] = ctx.config
    env_id = str(cfg["env"])
    with torch_threads(1):
        random_ret = float(
            evaluate_policy(
                env_id,
                lambda o: np.random.default_rng(ctx.seed).uniform(-1, 1, (len(o), 1)),
                n_episodes=int(cfg["eval_episodes"]),
                seed=ctx.seed + 7,
                torch_policy=False,
            ).mean()
        )
        ref_ret = float(
            evaluate_policy(
                env_id, energy_controller, n_episodes=int(cfg["eval_episodes"]), seed=ctx.seed + 7, torch_policy=False
            ).mean()
        )
        per_agent: dict[str, list[float]] = {}
        for s in range(int(cfg["seeds"])):
            seed = ctx.seed * 100 + s
            data = collect(env_id, str(cfg["quality"]), int(cfg["n_transitions"]), seed=seed)
            scale = data.reward_scale()
            r = data.rewards / scale
            for name, method, overrides in cfg["agents"]:
                config = AgentConfig(
                    method=method,
                    obs_dim=data.obs_dim,
                    act_dim=data.act_dim,
                    r_min=float(r.min()),
                    r_max=float(r.max()),
                    gamma=float(cfg["gamma"]),
                    hidden=tuple(cfg["hidden"]),
                    lr=float(cfg["lr"]),
                    num_action_samples=int(cfg["num_action_samples"]),
                    **overrides,
                )
                agent = make_agent(config, seed=_init_seed(seed, name))
                train_agent(
                    agent,
                    data,
                    steps=int(cfg["steps"]),
                    batch_size=int(cfg["batch_size"]),
                    reward_scale=scale,
                    generator=torch.Generator().manual_seed(seed),
                    device=ctx.device,
                )
                g = torch.Generator().manual_seed(seed + 1)
                rets = evaluate_policy(
                    env_id,
                    lambda o, agent=agent, g=g: agent.act(o.to(ctx.device), generator=g),
                    n_episodes=int(cfg["eval_episodes"]),
                    seed=seed + 11,
                )
                per_agent.setdefault(name, []).append(float(normalised_return(rets.mean(), random_ret, ref_ret)))
    table = {
        name: {"norm_return": float(np.mean(v)), "norm_return_std": float(np.std(v))} for name, v in per_agent.items()
    }
    ours = table.pop("value_flows")
    ours.update(random_return=random_ret, controller_return=ref_ret)
    return BenchResult(
        metrics=ours,
        baselines=table,
        references={
            k: {kk: v for kk, v in d.items() if kk.startswith("ogbench")}
            for k, d in _PAPER.items()
            if "ogbench/cube-double-play" in d
        },
    )


_CHAIN_AGENTS = (
    ("value_flows", "value_flows", {}),
    ("c51", "c51", {}),
    ("iqn", "iqn", {}),
    ("value_flows_gamma_dcfm", "value_flows", {"dcfm_scale_gamma": True}),
)

CHAIN = Scenario(
    name="rl.value_flows.chain",
    package="rl",
    method="value_flows",
    run=run_chain,
    variants={
        "quick": {
            "n_transitions": 50_000,
            "n_grid_actions": 9,
            "n_rollouts": 1000,
            "n_model_samples": 1000,
            "steps": 1200,
            "batch_size": 256,
            "hidden": (64, 64),
            "lr": 1e-3,
            "tau": 0.05,
            "agents": _CHAIN_AGENTS,
        },
        "full": {
            "n_transitions": 100_000,
            "n_grid_actions": 9,
            "n_rollouts": 2000,
            "n_model_samples": 1000,
            "steps": 8000,
            "batch_size": 256,
            "hidden": (128, 128),
            "lr": 3e-4,
            "tau": 0.005,
            "agents": (
                *_CHAIN_AGENTS,
                ("value_flows_no_dcfm", "value_flows", {"lambda_d": 0.0}),
                ("value_flows_no_conf", "value_flows", {"use_confidence": False}),
            ),
        },
    },
    directions={
        "w1": "min",
        "mean_abs_error": "min",
        "spearman_spread_1eps": "max",
        "spearman_spread_64eps": "max",
        "spearman_sample_std": "max",
        "train_s": "min",
    },
    description="Chain MDP return distributions: W1 to Monte-Carlo returns over a 12x9 (s, a) grid; spread-std rank "
    "correlation.",
)

_CONTROL_AGENTS = (
    ("value_flows", "value_flows", {}),
    ("td_fql_style", "td", {}),
    ("iqn", "iqn", {}),
    ("value_flows_no_conf", "value_flows", {"use_confidence": False}),
    ("value_flows_no_dcfm", "value_flows", {"lambda_d": 0.0}),
)

CONTROL = Scenario(
    name="rl.value_flows.control",
    package="rl",
    method="value_flows",
    run=run_control,
    variants={
        "quick": {
            "env": "Pendulum-v1",
            "quality": "medium",
            "n_transitions": 20_000,
            "seeds": 1,
            "steps": 500,
            "batch_size": 128,
            "hidden": (64, 64),
            "lr": 1e-3,
            "gamma": 0.97,
            "num_action_samples": 8,
            "eval_episodes": 10,
            "agents": _CONTROL_AGENTS[:3],
        },
        "full": {
            "env": "Pendulum-v1",
            "quality": "medium",
            "n_transitions": 100_000,
            "seeds": 3,
            "steps": 50_000,
            "batch_size": 256,
            "hidden": (128, 128),
            "lr": 3e-4,
            "gamma": 0.99,
            "num_action_samples": 16,
            "eval_episodes": 20,
            "agents": _CONTROL_AGENTS,
        },
    },
    directions={"norm_return": "max", "norm_return_std": "min"},
    description="Offline stochastic Pendulum (reward noise 0.5, action noise 0.1): normalised return (0 random, "
    "100 energy-shaping controller).",
)

SCENARIOS = (CHAIN, CONTROL)
