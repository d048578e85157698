"""The typed settings shared by the WFR-FM scenarios: `WFRBench` (its defaults are the full variant), the quick
variant derived from a full one and the smoke variant from a quick one, the metric directions and the paper's
label."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from flowlab.biology_dynamics.wfr_fm.model import WFRConfig
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import NeuralODEConfig
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFMConfig
from flowlab.biology_dynamics.wfr_fm.presets import MATCHING, NEURAL_ODE, sized
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFMConfig
from flowlab.core.config import Config

__all__ = ["DIRECTIONS", "PAPER", "WFRBench", "quick", "smoke", "with_matching"]

PAPER = "WFR-FM [paper, unverified]"

DIRECTIONS = {
    "w1_mean": "min",
    "tmv_mean": "min",
    "growth_corr": "max",
    "holdout_w1_t1": "min",
    "holdout_w1_t2": "min",
    "train_seconds": "min",
    "speedup_to_w1": "max",
    "speedup_to_wfr_w1": "max",
    "speedup_to_w1_rk4": "max",
    "speedup_to_wfr_w1_rk4": "max",
}


@dataclass(frozen=True)
class WFRBench(Config):
    """Settings of a WFR-FM scenario; the defaults are the full variant's.

    `wfr`, `ot_cfm`, `uot_cfm`: the matching methods, trained with one width, length and batch (see
    `with_matching`); UOT-CFM reuses WFR-FM's plan, so their deltas must agree. `neural_ode`: the simulation-trained
    baseline as the spec and TIGON train it (the adjoint of adaptive dopri5); `neural_ode_rk4`: our faster variant
    (backpropagation through fixed-step rk4: about 4x less time per step at a similar W1 on gene and EMT); the
    speed-up is reported against both, the rk4 one under the suffix "_rk4". `threads`: torch threads while the
    scenario runs (None: unchanged); `curve_points`: evenly and log-spaced steps of each W1-vs-time curve;
    `cell_fraction`: the share of each time point's cells the scenario keeps (`data.subsample_cells`; 1: all, as
    the quick and full variants)."""

    wfr: WFRConfig = field(default_factory=lambda: sized(WFRConfig(), "full"))
    ot_cfm: OTCFMConfig = field(default_factory=lambda: sized(OTCFMConfig(), "full"))
    uot_cfm: UOTCFMConfig = field(default_factory=lambda: sized(UOTCFMConfig(), "full"))
    neural_ode: NeuralODEConfig = field(
        default_factory=lambda: sized(NeuralODEConfig(), "full", solver="dopri5", adjoint=True)
    )
    neural_ode_rk4: NeuralODEConfig = field(
        default_factory=lambda: sized(NeuralODEConfig(), "full", solver="rk4", step_size=0.05)
    )
    threads: int | None = 1
    curve_points: int = 30
    cell_fraction: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.uot_cfm.delta != self.wfr.delta:
            raise ValueError(
                f"uot_cfm.delta: expected wfr.delta = {self.wfr.delta} (UOT-CFM reuses WFR-FM's plan), "
                f"got {self.uot_cfm.delta}"
            )
        if self.curve_points < 1:
            raise ValueError(f"curve_points: expected a positive count, got {self.curve_points}")
        if not 0 < self.cell_fraction <= 1:
            raise ValueError(f"cell_fraction: expected a share in (0, 1], got {self.cell_fraction}")


B = TypeVar("B", bound=WFRBench)


def with_matching(bench: B, **values: Any) -> B:
    """`bench` with `values` set in every matching method's config that has the field (OT-CFM has no delta,
    g_hidden or plan_iters)."""

    def update(cfg: Config) -> Config:
        names = {f.name for f in dataclasses.fields(cfg)}
        return replace(cfg, **{k: v for k, v in values.items() if k in names})

    return replace(bench, wfr=update(bench.wfr), ot_cfm=update(bench.ot_cfm), uot_cfm=update(bench.uot_cfm))


def quick(full: B) -> B:
    """The quick variant of a full one: the networks, lengths and batches of a CPU run of a few minutes (the
    `quick` preset, `flowlab cells fit --config quick`)."""
    return replace(
        with_matching(full, **MATCHING["quick"]),
        neural_ode=replace(full.neural_ode, **NEURAL_ODE["quick"]),
        neural_ode_rk4=replace(full.neural_ode_rk4, **NEURAL_ODE["quick"]),
        curve_points=20,
    )


def smoke(quick: B) -> B:
    """The smoke variant of a quick one: toy networks and lengths on a quarter of the cells, seconds on a CPU. It
    checks that every method's code path runs, not the fit."""
    return replace(
        with_matching(quick, **MATCHING["smoke"]),
        neural_ode=replace(quick.neural_ode, **NEURAL_ODE["smoke"]),
        neural_ode_rk4=replace(quick.neural_ode_rk4, **NEURAL_ODE["smoke"]),
        curve_points=1,
        cell_fraction=0.25,
    )
