"""MAC-Flow's scenarios: typed variants that refuse bad tables, one headline with its claim, the data artifact."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flowlab.rl_control.benchmarks import SCENARIOS
from flowlab.rl_control.mac_flow.benchmarks import SPREAD, TOYS
from flowlab.rl_control.mac_flow.benchmarks.common import LearnerRow
from flowlab.rl_control.mac_flow.model import MARLConfig


def test_scenarios_are_registered_with_typed_variants_and_one_headline():
    assert {TOYS.name, SPREAD.name} <= {s.name for s in SCENARIOS}
    assert [s.name for s in (TOYS, SPREAD) if s.headline] == ["rl.mac_flow.spread"]
    assert SPREAD.claim.metric == "speedup_vs_diffusion_b256" and SPREAD.claim.threshold == 10.0
    quick = TOYS.variants["quick"]
    with pytest.raises(TypeError, match="stepz"):
        replace(quick, stepz=10)
    with pytest.raises(ValueError, match="agents"):
        replace(quick, agents=quick.agents[1:])  # no "mac_flow" row
    with pytest.raises(ValueError, match="agents"):
        replace(quick, agents=(*quick.agents, LearnerRow("joint_flow", MARLConfig(method="joint_flow"))))
    with pytest.raises(ValueError, match="chess"):
        replace(quick, games=("chess",))
    with pytest.raises(ValueError, match="qualities"):
        replace(SPREAD.variants["quick"], qualities=("great",))
    (artifact,) = SPREAD.requires(SPREAD.variants["quick"], None)
    assert artifact.name == "rl.spread_datasets" and artifact.config.n_agents == 2
    assert SPREAD.variants["full"].data.n_agents == 3 and SPREAD.variants["full"].agents[0].learner.hidden == (256,) * 3
