"""What the MAC-Flow scenarios share: a table row (`LearnerRow`), building and training one row's learner, and the
row names the tables use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from flowlab.core.bench import name_seed
from flowlab.core.config import Config
from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.mac_flow.agents import MARLAgent, train_marl
from flowlab.rl_control.mac_flow.baselines import JointFlowAgent
from flowlab.rl_control.mac_flow.learners import make_learner
from flowlab.rl_control.mac_flow.model import MACFlow, MARLConfig

__all__ = ["OURS", "LearnerRow", "check_rows", "learner_rows", "train_row"]

#: the row whose metrics are "ours"; its trained stage-1 flow is also scored as the row "joint_flow"
OURS = "mac_flow"


@dataclass(frozen=True)
class LearnerRow(Config):
    """One row of a scenario's table: its `name` and the learner's settings."""

    name: str
    learner: MARLConfig


def learner_rows(base: MARLConfig, specs: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[LearnerRow, ...]:
    """One row per (name, fields) of `specs`: `base` with those fields replaced (`method` among them)."""
    return tuple(LearnerRow(name, replace(base, **fields)) for name, fields in specs)


def check_rows(rows: Sequence[LearnerRow]) -> None:
    """A table needs distinct row names, among them "mac_flow" (ours, a MAC-Flow learner) and not "joint_flow" (the
    name of MAC-Flow's own stage-1 flow)."""
    names = [row.name for row in rows]
    if OURS not in names or "joint_flow" in names or len(set(names)) != len(names):
        raise ValueError(f"agents: expected distinct row names including {OURS!r} and not 'joint_flow', got {names}")
    if next(r for r in rows if r.name == OURS).learner.method != "mac_flow":
        raise ValueError(f"agents: the row {OURS!r} must have method 'mac_flow'")


def train_row(
    row: LearnerRow, data: OfflineDataset, *, seed: int, steps: int, batch_size: int, device: torch.device | str
) -> dict[str, MARLAgent]:
    """The row's learner, initialised from (seed, row name) and trained on `data` (rewards normalised by its scale)
    with generator `seed`. Returns {row name: learner}, plus {"joint_flow": its stage-1 flow} for a MAC-Flow row."""
    agent = make_learner(
        row.learner, obs_dim=data.obs_dim, act_dim=data.act_dim, n_agents=data.n_agents, seed=name_seed(seed, row.name)
    )
    train_marl(
        agent,
        data,
        steps=steps,
        batch_size=batch_size,
        reward_scale=data.reward_scale(),
        generator=torch.Generator().manual_seed(seed),
        device=device,
    )
    out: dict[str, MARLAgent] = {row.name: agent}
    if isinstance(agent, MACFlow) and row.name == OURS:
        out["joint_flow"] = JointFlowAgent(agent.flow, lr=row.learner.lr)
    return out
