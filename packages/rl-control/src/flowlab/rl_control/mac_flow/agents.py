"""What every multi-agent learner here shares: agent inputs with one-hot ids, the `MARLAgent` interface (training
stages, batched acting, the network that acting calls), and `train_marl`, which runs each stage on
`flowlab.core.train.fit`.

Observations are (B, N, O) for N agents and actions (B, N, A) in [-1, 1]; the joint state s is the concatenation of
the agents' observations (B, N * O). Decentralised networks see one agent's row [o_i, onehot(i)] (B * N rows through
one shared network, never a loop over agents)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from flowlab.core.train import fit, latest_checkpoint
from flowlab.core.train.loop import FitResult
from flowlab.rl_control.data import OfflineDataset

__all__ = ["MARLAgent", "Stage", "check_obs", "joint_state", "train_marl", "with_agent_ids"]


def with_agent_ids(obs: torch.Tensor) -> torch.Tensor:
    """Each agent's input [o_i, onehot(i)]: obs (B, N, O) -> (B, N, O + N)."""
    b, n, _ = obs.shape
    ids = torch.eye(n, device=obs.device, dtype=obs.dtype).expand(b, n, n)
    return torch.cat([obs, ids], -1)


def joint_state(obs: torch.Tensor) -> torch.Tensor:
    """The joint state s = (o_1, ..., o_N): obs (B, N, O) -> (B, N * O)."""
    return obs.flatten(1)


def check_obs(obs: torch.Tensor, n_agents: int, obs_dim: int, name: str = "obs") -> None:
    """Refuse observations that are not (B, n_agents, obs_dim), with a message naming the argument."""
    if not isinstance(obs, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor (B, {n_agents}, {obs_dim}), got {type(obs).__name__}")
    if obs.dim() != 3 or obs.shape[1:] != (n_agents, obs_dim):
        raise ValueError(
            f"{name}: expected shape (B, {n_agents}, {obs_dim}) (batch, agents, obs), got {tuple(obs.shape)}"
        )


@dataclass(frozen=True)
class Stage:
    """One training stage: `module(batch, generator) -> (loss, logs)` is trained on the parameters it holds that
    require gradients, with Adam at `lr`; `after_step()` runs after each optimiser step (target updates)."""

    name: str
    module: nn.Module
    lr: float
    after_step: Callable[[], None] | None = None


class MARLAgent(nn.Module):
    """A multi-agent learner for `n_agents` agents with observations (obs_dim,) and actions (act_dim,) in [-1, 1].
    Subclasses give their training `stages()`, `act(obs, generator=)` -> (B, N, A) and `act_network`, the module
    acting calls (the latency table counts its calls per joint action)."""

    def __init__(self, obs_dim: int, act_dim: int, n_agents: int) -> None:
        super().__init__()
        for name, value in (("obs_dim", obs_dim), ("act_dim", act_dim), ("n_agents", n_agents)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        self.obs_dim, self.act_dim, self.n_agents = obs_dim, act_dim, n_agents

    def stages(self) -> Sequence[Stage]:  # pragma: no cover - abstract
        """The training stages, run in order."""
        raise NotImplementedError

    @property
    def act_network(self) -> nn.Module:  # pragma: no cover - abstract
        """The module that acting calls; the latency table counts its forward calls per joint action."""
        raise NotImplementedError

    def act(self, obs: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Joint actions (B, N, A) in [-1, 1] for observations (B, N, O)."""
        check_obs(obs, self.n_agents, self.obs_dim)
        with torch.inference_mode():
            return self._act(obs, generator)

    def _act(self, obs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


def train_marl(
    agent: MARLAgent,
    dataset: OfflineDataset,
    *,
    steps: int,
    batch_size: int = 256,
    reward_scale: float = 1.0,
    generator: torch.Generator,
    device: torch.device | str = "cpu",
    ckpt_dir: str | os.PathLike[str] | None = None,
    ckpt_every: int = 1000,
    progress: bool = False,
    log_every: int = 500,
) -> dict[str, FitResult]:
    """Every stage of `agent`, one after the other, for `steps` optimiser steps each on uniform minibatches of
    `dataset` (rewards divided by `reward_scale`), through `flowlab.core.train.fit` (gradient clipping at 10,
    progress, DDP under torchrun). With `ckpt_dir`, stage s checkpoints into `ckpt_dir/<s>` every `ckpt_every` steps
    and at its end, and a rerun resumes where it stopped, as the uninterrupted run would have gone on (a finished
    stage is loaded and skipped; `steps` may grow only while no later stage has begun). Returns each stage's
    `FitResult`."""
    if not isinstance(agent, MARLAgent):
        raise ValueError(f"agent: expected a MARLAgent, got {type(agent).__name__}")
    if not isinstance(dataset, OfflineDataset):
        raise ValueError(f"dataset: expected an OfflineDataset, got {type(dataset).__name__}")
    dataset.check_agents(agent.n_agents)
    if dataset.obs_dim != agent.obs_dim or dataset.act_dim != agent.act_dim:
        raise ValueError(
            f"dataset: dims (obs {dataset.obs_dim}, act {dataset.act_dim}) do not match the agent's "
            f"(obs {agent.obs_dim}, act {agent.act_dim})"
        )
    stages = agent.stages()
    if ckpt_dir is not None:
        _check_rerun(stages, ckpt_dir, steps)
    agent.to(device)
    data = dataset.sampler(batch_size, device=device, reward_scale=reward_scale)
    results = {}
    for stage in stages:
        params = [p for p in stage.module.parameters() if p.requires_grad]
        hooks = () if stage.after_step is None else (lambda info, f=stage.after_step: f(),)
        results[stage.name] = fit(
            stage.module,
            lambda module, batch, gen: module(batch, gen),
            data,
            steps=steps,
            optimizer=torch.optim.Adam(params, lr=stage.lr),
            grad_clip=10.0,
            ckpt_dir=None if ckpt_dir is None else Path(ckpt_dir) / stage.name,
            ckpt_every=ckpt_every,
            device=device,
            generator=generator,
            callbacks=hooks,
            log_every=min(log_every, steps),
            progress=progress,
        )
    return results


def _check_rerun(stages: Sequence[Stage], ckpt_dir: str | os.PathLike[str], steps: int) -> None:
    """Refuse (ValueError naming `steps`) a rerun into `ckpt_dir` that could not go on as the uninterrupted run of
    `steps` steps per stage would have: a stage trained past `steps`, or one with steps left after a later stage has
    begun (that stage trained on this one's weights of then, which more steps here would not change)."""
    reached = []
    for stage in stages:
        last = latest_checkpoint(Path(ckpt_dir) / stage.name)
        reached.append(0 if last is None else int(last.name.removeprefix("step-")))
    if max(reached, default=0) > steps:
        raise ValueError(f"steps: {ckpt_dir} is trained to step {max(reached)} already; expected steps >= "
                         f"{max(reached)}")  # fmt: skip
    for i, done in enumerate(reached):
        later = [s.name for s, n in zip(stages[i + 1 :], reached[i + 1 :], strict=True) if n]
        if done < steps and later:
            raise ValueError(f"steps: in {ckpt_dir} the {later[0]!r} stage has begun on the {stages[i].name!r} "
                             f"stage's {done} steps; rerun with steps={done} or train into another folder")  # fmt: skip
