"""`make_learner`: the agent a `MARLConfig` names (MAC-Flow or one of its baselines), built for the data's
dimensions, its initial weights from a seed of its own; `save_run` / `load_learner`: a trained learner's folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from flowlab.core.nets import seeded_init
from flowlab.core.train import latest_checkpoint, load_checkpoint
from flowlab.rl_control.envs.names import GAME_NAMES
from flowlab.rl_control.mac_flow.agents import MARLAgent
from flowlab.rl_control.mac_flow.baselines import MATD3BC, DiffusionJointBC, GaussianBC, JointFlowAgent
from flowlab.rl_control.mac_flow.joint_flow import JointFlowBC
from flowlab.rl_control.mac_flow.model import MACFlow, MARLConfig

__all__ = ["RUN_FILE", "load_learner", "make_learner", "run_record", "save_run"]

RUN_FILE = "run.json"


def _build(c: MARLConfig, obs_dim: int, act_dim: int, n_agents: int) -> MARLAgent:
    dims = (obs_dim, act_dim, n_agents)
    if c.method == "mac_flow":
        return MACFlow(c, obs_dim=obs_dim, act_dim=act_dim, n_agents=n_agents)
    if c.method == "joint_flow":
        flow = JointFlowBC(*dims, c.hidden, mode=c.bc_flow, num_flow_steps=c.num_flow_steps, noise_bound=c.noise_bound)
        return JointFlowAgent(flow, lr=c.lr)
    if c.method in ("gaussian_bc", "independent_bc"):
        return GaussianBC(*dims, c.hidden, inputs="joint" if c.method == "gaussian_bc" else "own", lr=c.lr)
    if c.method == "matd3bc":
        return MATD3BC(
            *dims,
            c.hidden,
            lr=c.lr,
            gamma=c.gamma,
            tau=c.tau,
            bc_weight=c.bc_weight,
            policy_noise=c.policy_noise,
            noise_clip=c.noise_clip,
        )
    return DiffusionJointBC(*dims, c.hidden, lr=c.lr, diffusion_steps=c.diffusion_steps)


def make_learner(config: MARLConfig, *, obs_dim: int, act_dim: int, n_agents: int, seed: int | None = None):
    """The `MARLAgent` of `config.method` for `n_agents` agents with observations (obs_dim,) and actions (act_dim,)
    in [-1, 1]. With `seed`, its networks are initialised from that seed alone (torch's global RNG is untouched)."""
    if not isinstance(config, MARLConfig):
        raise ValueError(f"config: expected a MARLConfig, got {type(config).__name__}")
    for name, value in (("obs_dim", obs_dim), ("act_dim", act_dim), ("n_agents", n_agents)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    if seed is None:
        return _build(config, obs_dim, act_dim, n_agents)
    with seeded_init(seed):
        return _build(config, obs_dim, act_dim, n_agents)


def run_record(agent: MARLAgent, config: MARLConfig, *, env: str, reward_scale: float) -> dict:
    """What `run.json` holds beside a trained learner's stage checkpoints: its config, dimensions, environment and
    reward scale, everything `load_learner` needs."""
    return {
        "learner": config.to_dict(),
        "dims": {"obs_dim": agent.obs_dim, "act_dim": agent.act_dim, "n_agents": agent.n_agents},
        "env": env,
        "reward_scale": reward_scale,
    }


def save_run(folder: str | os.PathLike[str], agent: MARLAgent, config: MARLConfig, *, env: str, reward_scale: float):
    """Write `run_record`'s `run.json` into `folder`."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    record = run_record(agent, config, env=env, reward_scale=reward_scale)
    (Path(folder) / RUN_FILE).write_text(json.dumps(record, indent=1))


def load_learner(folder: str | os.PathLike[str], *, device: torch.device | str = "cpu") -> tuple[MARLAgent, dict]:
    """The learner trained into `folder` by `train_marl` (with `save_run`), every stage's latest checkpoint loaded
    (`torch.load(weights_only=True)`), and the run's metadata."""
    folder = Path(folder)
    meta_path = folder / RUN_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"run: {meta_path} not found (train with `flowlab rl marl-train --out {folder}`)")
    try:
        meta = json.loads(meta_path.read_text())
        config = MARLConfig.from_mapping(meta["learner"])
        dims = {k: int(meta["dims"][k]) for k in ("obs_dim", "act_dim", "n_agents")}
        if meta["env"] not in ("spread", *GAME_NAMES):
            raise ValueError(f"unknown environment {meta['env']!r}")
        agent = make_learner(config, **dims)
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"run: {meta_path} is not a MAC-Flow run file ({type(err).__name__}: {err})") from None
    for stage in agent.stages():
        ckpt = folder / stage.name
        if latest_checkpoint(ckpt) is None:
            raise FileNotFoundError(
                f"run: no checkpoint (step-*/weights.pt) of stage {stage.name!r} under {ckpt} (training unfinished?)"
            )
        try:
            load_checkpoint(ckpt, model=stage.module, device=device, restore_rng=False)
        except ValueError as err:  # a corrupt checkpoint, or weights of other shapes than the learner's
            raise ValueError(f"run: {str(err).removeprefix('path: ')} (the learner {meta_path} describes)") from None
    return agent.to(device), meta
