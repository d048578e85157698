"""Named sizes (`smoke`, `quick`, `full`): the networks, lengths, batches and plan iterations the benchmarks train,
for every method, so `flowlab cells fit --config quick` and `tl.fit(..., config="quick")` train the bench's quick
model. A preset leaves the data's own settings alone (delta, hold-out, seed).

`full` is the reference code's sizes (the matching methods' batch 256, as the paper's runs), `quick` a CPU run of a
few minutes, `smoke` a code-path check of seconds."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from flowlab.biology_dynamics.wfr_fm.names import PRESETS
from flowlab.core.config import Config

__all__ = ["MATCHING", "NEURAL_ODE", "PRESETS", "sized"]

#: the matching methods' (WFR-FM, OT-CFM, UOT-CFM) sizes per preset
MATCHING: dict[str, dict[str, Any]] = {
    "full": {"v_hidden": (256,) * 5, "g_hidden": (256,) * 3, "iters": 3000, "batch": 256, "plan_iters": 1000},
    "quick": {"v_hidden": (128,) * 3, "g_hidden": (128,) * 2, "iters": 500, "batch": 128, "plan_iters": 300},
    "smoke": {"v_hidden": (16,) * 2, "g_hidden": (16,), "iters": 20, "batch": 32, "plan_iters": 30},
}
#: the simulation-trained neural ODE's sizes per preset
NEURAL_ODE: dict[str, dict[str, Any]] = {
    "full": {"v_hidden": (128,) * 3, "g_hidden": (128,) * 2, "iters": 1500, "batch": 256},
    "quick": {"v_hidden": (64,) * 3, "g_hidden": (64,) * 2, "iters": 80, "batch": 128},
    "smoke": {"v_hidden": (16,), "g_hidden": (16,), "iters": 2, "batch": 32},
}
assert set(MATCHING) == set(NEURAL_ODE) == set(PRESETS)

C = TypeVar("C", bound=Config)


def _fields(config: Config) -> set[str]:
    return {f.name for f in dataclasses.fields(config)}


def sized(config: C, preset: str | None, **overrides: Any) -> C:
    """`config` with a preset's sizes (the neural ODE's for a config with a `solver`, else the matching methods')
    where it has those fields (None: no preset), then `overrides` (None values skipped). A field the config does
    not have is a ValueError naming it."""
    if preset is not None and preset not in MATCHING:
        raise ValueError(f"config: expected one of {list(PRESETS)}, got {preset!r}")
    names = _fields(config)
    table: Mapping[str, Any] = {} if preset is None else NEURAL_ODE[preset] if "solver" in names else MATCHING[preset]
    values = {k: v for k, v in table.items() if k in names}
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in names:
            raise ValueError(f"{key}: {type(config).__name__} has no such setting")
        values[key] = value
    return dataclasses.replace(config, **values)
