"""`flowlab rl marl-collect|marl-train|marl-evaluate` for MAC-Flow and its baselines."""

from __future__ import annotations

from pathlib import Path

import typer

from flowlab.core.cli import (
    OVERWRITE_HELP,
    RESUME_HELP,
    claim_run_option,
    device_option,
    option_error,
    positive_ints_option,
)
from flowlab.rl_control.cli_options import check_json_out, dataset_digest, read_dataset, write_json
from flowlab.rl_control.envs.names import GAME_NAMES, SPREAD_QUALITIES
from flowlab.rl_control.mac_flow.names import METHODS

app = typer.Typer(help="MAC-Flow: multi-agent flow BC distilled into one-step policies.", no_args_is_help=True)

ENVS = ("spread", *sorted(GAME_NAMES))


def _check_env(env: str) -> None:
    if env not in ENVS:
        raise typer.BadParameter(f"unknown environment {env!r}; expected one of {', '.join(ENVS)}", param_hint="--env")


def _check_spaces(env: str, dataset: Path, data) -> None:
    """Refuse a dataset whose agents, observations or actions are not those of `env` (spread: with the dataset's
    number of agents)."""
    from flowlab.rl_control.envs.coordination import game
    from flowlab.rl_control.envs.spread import SpreadEnvs

    if env == "spread":
        try:
            envs = SpreadEnvs(1, n_agents=data.n_agents)
        except ValueError as err:  # too few agents for the scenario
            raise typer.BadParameter(f"{dataset}: {err}", param_hint="--dataset") from None
        want = (data.n_agents, envs.obs_dim, envs.act_dim)
        envs.close()
    else:
        want = (game(env).n_agents, game(env).obs_dim, game(env).act_dim)
    have = (data.n_agents, data.obs_dim, data.act_dim)
    if have != want:
        shown = "{} agents with {}-D observations and {}-D actions"
        message = f"{dataset} holds {shown.format(*have)}, but {env} has {shown.format(*want)}"
        raise typer.BadParameter(f"{message} (collect it with `flowlab rl marl-collect --env {env}`)",
                                 param_hint="--dataset")  # fmt: skip


@app.command("marl-collect")
def collect_cmd(
    env: str = typer.Option("spread", help=f"one of {', '.join(ENVS)}"),
    quality: str = typer.Option("expert", help=f"spread's behaviour: {', '.join(SPREAD_QUALITIES)}"),
    transitions: int = typer.Option(100_000, min=1, help="number of (joint) transitions"),
    agents: int = typer.Option(3, help="spread: number of agents (and landmarks)"),
    seed: int = typer.Option(0, min=0),
    out: Path = typer.Option(Path("marl.npz"), help="output .npz file"),
) -> None:
    """Collect an offline multi-agent dataset (T, N, ...): scripted simple_spread behaviour, or a coordination game's
    behaviour (its quality is fixed by the game)."""
    from flowlab.rl_control.envs.coordination import game_dataset
    from flowlab.rl_control.envs.spread import collect_spread

    _check_env(env)
    try:
        if env == "spread":
            data = collect_spread(quality, transitions, seed=seed, n_agents=agents)
        else:
            data = game_dataset(env, transitions, seed=seed)
    except ValueError as err:
        raise option_error(err, {"n_agents": "--agents"}) from None
    path = data.save(out)
    typer.echo(
        f"wrote {len(data)} transitions of {data.n_agents} agents to {path} (mean reward {data.rewards.mean():.4g})"
    )


@app.command("marl-train")
def train_cmd(
    dataset: Path = typer.Option(..., help="an .npz dataset from `flowlab rl marl-collect`"),
    env: str = typer.Option("spread", help=f"the dataset's environment: {', '.join(ENVS)}"),
    method: str = typer.Option("mac_flow", help=f"one of {', '.join(METHODS)}"),
    steps: int = typer.Option(
        20_000, min=1, help="optimiser steps per training stage (MAC-Flow: flow BC, then policy)"
    ),
    batch_size: int = typer.Option(256, min=1),
    hidden: str = typer.Option("128,128", help="hidden widths, comma-separated"),
    lr: float = typer.Option(3e-4),
    gamma: float = typer.Option(0.95),
    alpha: float = typer.Option(1.0, help="MAC-Flow's distillation weight"),
    mixer: str = typer.Option("mean", help="mean, vdn or qmix"),
    bc_flow: str = typer.Option("joint", help="joint (the paper) or per_agent (the official code)"),
    seed: int = typer.Option(0, min=0),
    device: str = typer.Option("cpu"),
    out: Path = typer.Option(Path("runs/mac_flow"), help="run folder (--resume continues its run)"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Train MAC-Flow or a baseline offline; checkpoints per stage under --out, with run.json. --resume continues the
    run with the same dataset, environment, settings and seed (--steps may grow while no later stage has begun); a
    different run in --out is refused unless --overwrite."""
    import torch

    from flowlab.rl_control.mac_flow.agents import train_marl
    from flowlab.rl_control.mac_flow.learners import make_learner, run_record
    from flowlab.rl_control.mac_flow.model import MARLConfig

    _check_env(env)
    dev = device_option(device)
    widths = positive_ints_option(hidden, "--hidden")
    settings = {"method": method, "hidden": widths, "lr": lr, "gamma": gamma, "alpha": alpha, "mixer": mixer,
                "bc_flow": bc_flow}  # fmt: skip
    try:
        config = MARLConfig.from_mapping(settings)
    except ValueError as err:
        raise option_error(err) from None
    data = read_dataset(dataset, multi_agent=True)
    _check_spaces(env, dataset, data)
    agent = make_learner(config, obs_dim=data.obs_dim, act_dim=data.act_dim, n_agents=data.n_agents, seed=seed)
    record = run_record(agent, config, env=env, reward_scale=data.reward_scale())
    spec = {**record, "batch_size": batch_size, "seed": seed,
            "dataset_sha256": dataset_digest(dataset)}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    gen = torch.Generator().manual_seed(seed)
    try:
        results = train_marl(agent, data, steps=steps, batch_size=batch_size, reward_scale=record["reward_scale"],
                             generator=gen, device=dev, ckpt_dir=out, progress=True)  # fmt: skip
    except ValueError as err:  # steps: a rerun that could not continue this run
        raise option_error(err) from None
    losses = ", ".join(
        f"{k} loss {r.logs['loss']:.4g}" if r.logs else f"{k} trained before" for k, r in results.items()
    )
    typer.echo(f"trained {method} for {steps} steps per stage ({losses}); run folder {out}")


@app.command("marl-evaluate")
def evaluate_cmd(
    run: Path = typer.Option(..., help="a folder written by `flowlab rl marl-train`"),
    episodes: int = typer.Option(50, min=1, help="spread: parallel episodes; games: joint actions drawn"),
    seed: int = typer.Option(0, min=0),
    latency_repeats: int = typer.Option(200, min=0, help="act calls timed per batch size (0: no latency table)"),
    out: Path | None = typer.Option(None, help="also write the scores and latencies as JSON to this .json file"),
) -> None:
    """The returns (spread: team return per episode; games: payoff per joint action), their mean and std and the
    normalised return of the mean, 100 (R - R_random) / (R_expert - R_random) against fixed reference returns
    (flowlab.rl_control.envs.scores: spread with 2 or 3 agents and the games; none, with the reason, otherwise); then
    ms per act call at batch 1 and 256 with the network calls of one act. --out writes the same as JSON."""
    import torch

    from flowlab.rl_control.envs.coordination import game
    from flowlab.rl_control.envs.scores import score_line, score_returns
    from flowlab.rl_control.envs.spread import evaluate_spread
    from flowlab.rl_control.mac_flow.evaluate import measure_latency
    from flowlab.rl_control.mac_flow.learners import load_learner

    check_json_out(out)
    try:
        agent, meta = load_learner(run)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err).removeprefix("run: ").removeprefix("path: "), param_hint="--run") from None
    gen = torch.Generator().manual_seed(seed)
    if meta["env"] == "spread":
        rets = evaluate_spread(
            lambda o: agent.act(o, generator=gen), n_episodes=episodes, seed=seed, n_agents=agent.n_agents
        )
        record = score_returns(rets, f"spread/{agent.n_agents}")
    else:
        obs = torch.zeros(episodes, agent.n_agents, agent.obs_dim)
        record = score_returns(game(meta["env"]).payoff(agent.act(obs, generator=gen)).numpy(), meta["env"])
    typer.echo(score_line(record))
    latencies = []
    if latency_repeats:
        typer.echo("batch  ms/act  network calls")
        for batch in (1, 256):
            obs = torch.randn(batch, agent.n_agents, agent.obs_dim, generator=torch.Generator().manual_seed(batch))
            lat = measure_latency(agent, obs, repeats=latency_repeats, warmup=max(5, latency_repeats // 10))
            typer.echo(f"{batch:5d}  {lat.ms:6.3f}  {lat.network_calls}")
            latencies.append({"batch": lat.batch, "ms": lat.ms, "network_calls": lat.network_calls})
    if out is not None:
        write_json(out, {"run": str(run), "method": meta["learner"]["method"], "seed": seed, **record,
                         "latency": latencies})  # fmt: skip
