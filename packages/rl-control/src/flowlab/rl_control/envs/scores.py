"""Normalised returns as D4RL defines them, 100 * (R - R_random) / (R_expert - R_random), against fixed reference
returns (the 0 and 100 marks) of the environments the package supports, so that scores compare across runs; and the
JSON record of an evaluation. Numpy only: the `flowlab rl` commands import it inside their evaluation.

`REFERENCE_RETURNS` is keyed by environment: a gymnasium id, `spread/<N>` for simple_spread with N agents, or a
coordination game's name. How each pair was measured:
- Pendulum-v1, Reacher-v5: mean returns over 500 episodes of uniform random actions and of the scripted controller
  (`envs.control.CONTROLLERS`) under `evaluate_policy`'s protocol (action noise 0.1, no reward noise):
  `value_flows.benchmarks.common.reference_returns(env, 500, seed=0)`.
- spread/2, spread/3: mean team returns over 1000 episodes of `evaluate_spread` (seed 0) of uniform random forces and
  of the scripted landmark assignment (temperature 0.05) without action noise.
- the games: the mean payoff of uniform random joint actions (1e6 draws; quadratic's -1/6 and xor's 1/2 exact) and
  the payoff's maximum.
The benchmarks measure their own marks beside each run (fewer episodes), so their normalised returns differ a little.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["REFERENCE_RETURNS", "ReferenceReturns", "normalised_return", "score_line", "score_returns"]


@dataclass(frozen=True)
class ReferenceReturns:
    """The mean returns that score 0 (`random`) and 100 (`expert`)."""

    random: float
    expert: float


REFERENCE_RETURNS: dict[str, ReferenceReturns] = {
    "Pendulum-v1": ReferenceReturns(random=-1237.7, expert=-155.8),
    "Reacher-v5": ReferenceReturns(random=-43.39, expert=-9.28),
    "spread/2": ReferenceReturns(random=-20.63, expert=-6.40),
    "spread/3": ReferenceReturns(random=-25.74, expert=-8.28),
    "matrix": ReferenceReturns(random=0.0115, expert=2.0),
    "quadratic": ReferenceReturns(random=-1 / 6, expert=1.0),
    "ring": ReferenceReturns(random=0.1729, expert=1.0),
    "xor": ReferenceReturns(random=0.5, expert=1.0),
}


def normalised_return(returns: np.ndarray | float, random_return: float, reference_return: float) -> np.ndarray:
    """100 * (R - R_random) / (R_reference - R_random)."""
    return 100.0 * (np.asarray(returns) - random_return) / (reference_return - random_return)


def score_returns(returns: Sequence[float] | np.ndarray, env: str) -> dict[str, Any]:
    """The JSON record (for `flowlab.core.cli.json_text`) of per-episode `returns` (E,) in `env`: `returns`,
    `mean_return`, `std_return`, `reference_returns` ({random, expert} or None) and `normalised_return`, the mean's
    normalised return, or None beside a `normalised_return_reason` where `env` has no references."""
    rets = np.asarray(returns, dtype=np.float64)
    if rets.ndim != 1 or len(rets) == 0:
        raise ValueError(f"returns: expected a non-empty 1-D array (E,), got shape {rets.shape}")
    record: dict[str, Any] = {"env": env, "returns": rets.tolist(), "mean_return": float(rets.mean()),
                              "std_return": float(rets.std())}  # fmt: skip
    ref = REFERENCE_RETURNS.get(env)
    if ref is None:
        reason = f"no reference returns for {env!r} (have {', '.join(REFERENCE_RETURNS)})"
        return {**record, "reference_returns": None, "normalised_return": None, "normalised_return_reason": reason}
    score = float(normalised_return(record["mean_return"], ref.random, ref.expert))
    return {**record, "reference_returns": {"random": ref.random, "expert": ref.expert}, "normalised_return": score}


def score_line(record: dict[str, Any]) -> str:
    """The one line a command prints of a `score_returns` record."""
    line = f"return {record['mean_return']:.4g} +- {record['std_return']:.3g} over {len(record['returns'])}"
    if record["normalised_return"] is None:
        return f"{line}; no normalised return: {record['normalised_return_reason']}"
    ref = record["reference_returns"]
    return f"{line}; normalised {record['normalised_return']:.1f} (0: {ref['random']:.4g}, 100: {ref['expert']:.4g})"
