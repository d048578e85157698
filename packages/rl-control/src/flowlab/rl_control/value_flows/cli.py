"""`flowlab rl collect|train|evaluate` for Value Flows and its baselines."""

from __future__ import annotations

from pathlib import Path

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, claim_run_option, device_option, option_error
from flowlab.rl_control.cli_options import check_json_out, dataset_digest, read_dataset, write_json
from flowlab.rl_control.envs.names import QUALITIES
from flowlab.rl_control.value_flows.names import METHODS

app = typer.Typer(
    help="Value Flows: flow-based distributional RL (collect data, train, evaluate).", no_args_is_help=True
)

_ENVS = {"pendulum": "Pendulum-v1", "reacher": "Reacher-v5"}


def _check_spaces(env: str, obs_dim: int, act_dim: int) -> None:
    """Raise a `dataset: ...` (or, for an unknown environment, `env: ...`) ValueError unless data of these dimensions
    fits `env`."""
    from flowlab.rl_control.envs.control import check_dataset_spaces
    from flowlab.rl_control.value_flows.chain import ChainMDP

    if env != "chain":
        check_dataset_spaces(obs_dim, act_dim, _ENVS.get(env, env))
    elif obs_dim != ChainMDP().obs_dim:
        raise ValueError(f"dataset: {obs_dim}-D observations, but the chain has {ChainMDP().obs_dim} cells")


def _load_run(run: Path):
    """The agent trained into `run` (its fine-tuned weights after an online phase) and its run.json, every problem a
    typer error against --run."""
    from flowlab.rl_control.value_flows.agents import load_agent

    try:
        agent, meta = load_agent(run)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err).removeprefix("run: "), param_hint="--run") from None
    try:
        _check_spaces(meta["env"], agent.obs_dim, agent.act_dim)
    except ValueError as err:
        raise typer.BadParameter(f"{run / 'run.json'} is not a run of `flowlab rl train` ({err})",
                                 param_hint="--run") from None  # fmt: skip
    return agent, meta


@app.command("collect")
def collect_cmd(
    env: str = typer.Option("pendulum", help="chain, pendulum, reacher or any gymnasium id with a Box action space"),
    quality: str = typer.Option("medium", help=f"behaviour quality: {', '.join(QUALITIES)} (chain: its own policy)"),
    transitions: int = typer.Option(100_000, min=1, help="number of transitions"),
    seed: int = typer.Option(0, min=0),
    out: Path = typer.Option(Path("data.npz"), help="output .npz file"),
) -> None:
    """Collect an offline dataset with a scripted/noisy behaviour policy."""
    import torch

    from flowlab.rl_control.envs.control import collect
    from flowlab.rl_control.value_flows.chain import ChainMDP

    if quality not in QUALITIES:
        raise typer.BadParameter(f"expected one of {', '.join(QUALITIES)}, got {quality!r}", param_hint="--quality")
    try:
        if env == "chain":
            data = ChainMDP().collect(transitions, generator=torch.Generator().manual_seed(seed))
        else:
            data = collect(_ENVS.get(env, env), quality, transitions, seed=seed)
    except ValueError as err:
        raise option_error(err) from None
    path = data.save(out)
    typer.echo(f"wrote {len(data)} transitions to {path} (mean reward {data.rewards.mean():.4g})")


@app.command("train")
def train_cmd(
    dataset: Path = typer.Option(
        ...,
        help="an .npz dataset from `flowlab rl collect`, a D4RL-style .hdf5/.h5/.npz file or a Minari dataset folder",
    ),
    env: str = typer.Option(
        "pendulum",
        help="chain (policy evaluation with the dataset's next actions), pendulum, reacher or a gymnasium id",
    ),
    method: str = typer.Option("value_flows", help=f"one of {', '.join(METHODS)}"),
    steps: int = typer.Option(10_000, min=1),
    batch_size: int = typer.Option(256, min=1),
    gamma: float = typer.Option(0.99),
    policy_extraction: str = typer.Option("rejection", help="rejection (argmax_Q over BC samples) or onestep (FQL)"),
    online_steps: int = typer.Option(0, min=0, help="offline-to-online: further steps, one environment step each"),
    n_envs: int = typer.Option(1, min=1, help="environment copies acting in parallel during the online phase"),
    seed: int = typer.Option(0, min=0),
    device: str = typer.Option("cpu"),
    out: Path = typer.Option(Path("runs/value_flows"), help="checkpoint folder"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Train an agent offline (then online with --online-steps); writes checkpoints (weights + config.json) under
    --out, and the fine-tuned weights under --out/online at the end of the online phase (it cannot resume mid-way:
    the environment state is not saved; an interrupted one starts again). --resume continues the run with the
    same dataset, environment, agent, batch size, seed and online phase (without an online phase --steps may grow); a
    different run in --out is refused unless --overwrite (run.json, written before training, holds the run and is
    what `evaluate` reads)."""
    import torch

    from flowlab.rl_control.value_flows.agents import AgentConfig, agent_spaces, make_agent, train_agent
    from flowlab.rl_control.value_flows.chain import ChainMDP
    from flowlab.rl_control.value_flows.online import OnlineReplay

    chain = env == "chain"
    if chain and online_steps:
        raise typer.BadParameter("the chain runs policy evaluation on its dataset; no online phase",
                                 param_hint="--online-steps")  # fmt: skip
    dev = device_option(device)
    try:
        config = AgentConfig(
            method=method,
            gamma=ChainMDP().gamma if chain else gamma,
            policy_extraction=policy_extraction,
            next_action="dataset" if chain else "policy",
        )
    except ValueError as err:
        raise option_error(err) from None
    data = read_dataset(dataset, multi_agent=False)
    try:
        _check_spaces(env, data.obs_dim, data.act_dim)
    except ValueError as err:
        raise option_error(err) from None
    scale = 1.0 if chain else data.reward_scale()
    r = data.rewards / scale
    reward_range = (float(r.min()), float(r.max()))
    agent = make_agent(config, obs_dim=data.obs_dim, act_dim=data.act_dim, reward_range=reward_range, seed=seed)
    meta = {
        "env": env,
        "agent": config.to_dict(),
        "spaces": agent_spaces(agent),
        "reward_scale": scale,
        "online": bool(online_steps),
        "batch_size": batch_size,
        "seed": seed,
        "dataset_sha256": dataset_digest(dataset),
    }
    if online_steps:  # the online phase fine-tunes the offline weights and starts again when interrupted: fixed lengths
        meta.update(steps=steps, online_steps=online_steps, n_envs=n_envs)
    claim_run_option(out, meta, overwrite=overwrite, resume=resume)
    common = {"batch_size": batch_size, "reward_scale": scale, "device": dev, "progress": True}
    res = train_agent(agent, data, steps=steps, generator=torch.Generator().manual_seed(seed), ckpt_dir=out, **common)
    if online_steps:
        replay = OnlineReplay(data, agent, _ENVS.get(env, env), steps=online_steps, seed=seed + 1, n_envs=n_envs)
        gen = torch.Generator().manual_seed(seed + 2)
        res = train_agent(agent, replay, steps=online_steps, generator=gen, ckpt_dir=out / "online", **common)
        replay.close()
        rets = replay.episode_returns
        typer.echo(f"online: {len(rets)} episodes" + (f", mean return {sum(rets) / len(rets):.1f}" if rets else ""))
    typer.echo(f"trained {method} for {res.steps} steps; checkpoint {res.checkpoint}")


@app.command("evaluate")
def evaluate_cmd(
    run: Path = typer.Option(..., help="a folder written by `flowlab rl train`"),
    episodes: int = typer.Option(20, min=1),
    seed: int = typer.Option(0, min=0),
    out: Path | None = typer.Option(None, help="also write the scores as JSON to this .json file"),
) -> None:
    """Control runs: the episodes' returns, their mean and std, and the normalised return of the mean,
    100 (R - R_random) / (R_expert - R_random) against the environment's fixed reference returns
    (flowlab.rl_control.envs.scores; none, with the reason, for an environment without them). Chain runs: W1 to
    Monte-Carlo returns, the mean error and the spread-std Spearman. --out writes the same as JSON."""
    import torch

    from flowlab.core.metrics import spearman
    from flowlab.rl_control.envs.control import evaluate_policy
    from flowlab.rl_control.envs.scores import score_line, score_returns
    from flowlab.rl_control.value_flows.chain import ChainMDP
    from flowlab.rl_control.value_flows.evaluate import distribution_scores

    check_json_out(out)
    agent, meta = _load_run(run)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        if meta["env"] == "chain":
            mdp = ChainMDP()
            pos, act = mdp.grid()
            truth = mdp.monte_carlo_returns(pos, act, 1000, generator=g)
            obs, acts = mdp.observe(pos), act[:, None]
            scores = distribution_scores(agent.sample_returns(obs, acts, 1000, generator=g), truth)
            record = {"env": "chain", "w1": scores.w1, "mean_abs_error": scores.mean_abs_error}
            line = f"W1 {scores.w1:.4f}  |mean error| {scores.mean_abs_error:.4f}"
            if hasattr(agent, "spread"):
                spread = agent.spread(obs, acts, generator=g, n_eps=1024, reduce="rms")
                record["spearman"] = spearman(spread, truth.std(1).float())
                line += f"  spearman(rms flow-derivative spread, std) {record['spearman']:.3f}"
            record.update(normalised_return=None, normalised_return_reason="the chain is scored by W1, not by returns")
        else:
            env_id = _ENVS.get(meta["env"], meta["env"])
            rets = evaluate_policy(env_id, lambda o: agent.act(o, generator=g), n_episodes=episodes, seed=seed)
            record = score_returns(rets, env_id)
            line = score_line(record)
    typer.echo(line)
    if out is not None:
        write_json(out, {"run": str(run), "method": meta["agent"]["method"], "seed": seed, **record})
