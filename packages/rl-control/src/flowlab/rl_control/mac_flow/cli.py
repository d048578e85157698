"""`flowlab rl marl-collect|marl-train|marl-evaluate` for MAC-Flow and its baselines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import typer

from flowlab.core.validation import check_device
from flowlab.rl_control.data import load_dataset
from flowlab.rl_control.envs.coordination import GAMES, game, game_dataset
from flowlab.rl_control.envs.spread import SPREAD_QUALITIES, collect_spread, evaluate_spread
from flowlab.rl_control.mac_flow.agents import train_marl
from flowlab.rl_control.mac_flow.evaluate import measure_latency
from flowlab.rl_control.mac_flow.learners import RUN_FILE, load_learner, make_learner, save_run
from flowlab.rl_control.mac_flow.model import METHODS, MARLConfig

app = typer.Typer(help="MAC-Flow: multi-agent flow BC distilled into one-step policies.", no_args_is_help=True)

ENVS = ("spread", *sorted(GAMES))


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _check_env(env: str) -> None:
    if env not in ENVS:
        raise ValueError(f"env: unknown environment {env!r}; expected one of {ENVS}")


def _positive(value: int, name: str) -> None:
    if value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value}")


@app.command("marl-collect")
def collect_cmd(
    env: str = typer.Option("spread", help=f"one of {', '.join(ENVS)}"),
    quality: str = typer.Option("expert", help=f"spread's behaviour: {', '.join(SPREAD_QUALITIES)}"),
    transitions: int = typer.Option(100_000, help="number of (joint) transitions"),
    agents: int = typer.Option(3, help="spread: number of agents (and landmarks)"),
    seed: int = typer.Option(0),
    out: Path = typer.Option(Path("marl.npz"), help="output .npz file"),
) -> None:
    """Collect an offline multi-agent dataset (T, N, ...): scripted simple_spread behaviour, or a coordination game's
    behaviour (its quality is fixed by the game)."""
    try:
        _check_env(env)
        _positive(transitions, "transitions")
        if env == "spread":
            data = collect_spread(quality, transitions, seed=seed, n_agents=agents)
        else:
            data = game_dataset(env, transitions, seed=seed)
    except ValueError as err:
        _fail(str(err))
    path = data.save(out)
    typer.echo(
        f"wrote {len(data)} transitions of {data.n_agents} agents to {path} (mean reward {data.rewards.mean():.4g})"
    )


@app.command("marl-train")
def train_cmd(
    dataset: Path = typer.Option(..., help="an .npz dataset from `flowlab rl marl-collect`"),
    env: str = typer.Option("spread", help=f"the dataset's environment: {', '.join(ENVS)}"),
    method: str = typer.Option("mac_flow", help=f"one of {', '.join(METHODS)}"),
    steps: int = typer.Option(20_000, help="optimiser steps per training stage (MAC-Flow: flow BC, then policy)"),
    batch_size: int = typer.Option(256),
    hidden: str = typer.Option("128,128", help="hidden widths, comma-separated"),
    lr: float = typer.Option(3e-4),
    gamma: float = typer.Option(0.95),
    alpha: float = typer.Option(1.0, help="MAC-Flow's distillation weight"),
    mixer: str = typer.Option("mean", help="mean, vdn or qmix"),
    bc_flow: str = typer.Option("joint", help="joint (the paper) or per_agent (the official code)"),
    seed: int = typer.Option(0),
    device: str = typer.Option("cpu"),
    out: Path = typer.Option(Path("runs/mac_flow"), help="run folder (a rerun with the same settings resumes)"),
) -> None:
    """Train MAC-Flow or a baseline offline; checkpoints per stage under --out, with run.json."""
    try:
        _check_env(env)
        _positive(steps, "steps")
        _positive(batch_size, "batch_size")
        dev = check_device(device)
        try:
            widths = tuple(int(h) for h in hidden.split(","))
        except ValueError:
            raise ValueError(f"hidden: expected comma-separated integers like 128,128, got {hidden!r}") from None
        config = MARLConfig.from_mapping(
            {
                "method": method,
                "hidden": widths,
                "lr": lr,
                "gamma": gamma,
                "alpha": alpha,
                "mixer": mixer,
                "bc_flow": bc_flow,
            }
        )
        data = load_dataset(dataset)
        if not data.multi_agent:
            raise ValueError(f"dataset: {dataset} has no agent axis; collect one with `flowlab rl marl-collect`")
        meta_path = out / RUN_FILE
        if meta_path.is_file() and json.loads(meta_path.read_text()).get("learner") != config.to_dict():
            raise ValueError(f"out: {out} holds a run with other settings; choose another folder")
        agent = make_learner(config, obs_dim=data.obs_dim, act_dim=data.act_dim, n_agents=data.n_agents, seed=seed)
        save_run(out, agent, config, env=env, reward_scale=data.reward_scale())
        results = train_marl(
            agent,
            data,
            steps=steps,
            batch_size=batch_size,
            reward_scale=data.reward_scale(),
            generator=torch.Generator().manual_seed(seed),
            device=dev,
            ckpt_dir=out,
            progress=True,
        )
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    losses = ", ".join(f"{k} loss {r.logs.get('loss', float('nan')):.4g}" for k, r in results.items())
    typer.echo(f"trained {method} for {steps} steps per stage ({losses}); run folder {out}")


@app.command("marl-evaluate")
def evaluate_cmd(
    run: Path = typer.Option(..., help="a folder written by `flowlab rl marl-train`"),
    episodes: int = typer.Option(50, help="spread: parallel episodes; games: joint actions drawn"),
    seed: int = typer.Option(0),
    latency_repeats: int = typer.Option(200, help="act calls timed per batch size (0: no latency table)"),
) -> None:
    """Mean return (spread: team return per episode; games: payoff), then ms per act call at batch 1 and 256 with
    the network calls of one act."""
    try:
        _positive(episodes, "episodes")
        if latency_repeats < 0:
            raise ValueError(f"latency_repeats: expected >= 0, got {latency_repeats}")
        agent, meta = load_learner(run)
    except (ValueError, FileNotFoundError) as err:
        _fail(str(err))
    gen = torch.Generator().manual_seed(seed)
    if meta["env"] == "spread":
        rets = evaluate_spread(
            lambda o: agent.act(o, generator=gen), n_episodes=episodes, seed=seed, n_agents=agent.n_agents
        )
    else:
        obs = torch.zeros(episodes, agent.n_agents, agent.obs_dim)
        rets = game(meta["env"]).payoff(agent.act(obs, generator=gen)).numpy()
    typer.echo(f"return {np.mean(rets):.4g} +- {np.std(rets):.3g} over {episodes}")
    if latency_repeats:
        typer.echo("batch  ms/act  network calls")
        for batch in (1, 256):
            obs = torch.randn(batch, agent.n_agents, agent.obs_dim, generator=torch.Generator().manual_seed(batch))
            lat = measure_latency(agent, obs, repeats=latency_repeats, warmup=max(5, latency_repeats // 10))
            typer.echo(f"{batch:5d}  {lat.ms:6.3f}  {lat.network_calls}")
