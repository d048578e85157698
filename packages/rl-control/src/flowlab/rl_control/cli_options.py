"""What both `flowlab rl` command families check before any work, as a typer error (exit 2) naming --dataset: the
offline dataset behind it. Heavy libraries load inside the function."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from flowlab.rl_control.data import OfflineDataset

__all__ = ["read_dataset"]


def read_dataset(path: Path, *, multi_agent: bool) -> OfflineDataset:
    """The offline dataset at `path` (--dataset), with an agent axis or without one as `multi_agent` says."""
    from flowlab.rl_control.data import load_dataset

    try:
        data = load_dataset(path)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err).removeprefix("path: "), param_hint="--dataset") from None
    if data.multi_agent != multi_agent:
        command = "`flowlab rl marl-collect`" if multi_agent else "`flowlab rl collect`"
        got = f"an agent axis of {data.n_agents} agents" if data.multi_agent else "no agent axis"
        want = "multi-agent" if multi_agent else "single-agent"
        raise typer.BadParameter(f"{path} holds {got}; expected {want} transitions from {command}",
                                 param_hint="--dataset")  # fmt: skip
    return data
