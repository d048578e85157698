"""Normalised returns: every environment's reference returns score 0 and 100; an environment without references
gets null and the reason, in JSON every parser reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flowlab.core.cli import json_text
from flowlab.rl_control.envs.scores import REFERENCE_RETURNS, score_line, score_returns


@pytest.mark.parametrize("env", sorted(REFERENCE_RETURNS))
def test_the_reference_returns_score_0_and_100(env):
    ref = REFERENCE_RETURNS[env]
    assert score_returns([ref.random] * 3, env)["normalised_return"] == pytest.approx(0.0, abs=1e-9)
    record = score_returns([ref.expert - 1.0, ref.expert + 1.0], env)
    assert record["normalised_return"] == pytest.approx(100.0)
    assert record["mean_return"] == pytest.approx(ref.expert) and record["std_return"] == pytest.approx(1.0)
    assert "normalised 100.0" in score_line(record)


def test_an_environment_without_references_gets_null_and_the_reason():
    record = json.loads(json_text(score_returns(np.array([-3.0, float("nan")]), "MountainCarContinuous-v0")))
    assert record["normalised_return"] is None and "MountainCarContinuous-v0" in record["normalised_return_reason"]
    assert record["returns"] == [-3.0, None] and record["mean_return"] is None and "mean_return_reason" in record
    assert "no normalised return" in score_line(score_returns([1.0], "chain"))
    with pytest.raises(ValueError, match="returns"):
        score_returns([], "Pendulum-v1")
