"""Value Flows scenarios: typed variants and tiny end-to-end runs."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from flowlab.core.bench import BenchContext
from flowlab.rl_control.benchmarks import SCENARIOS
from flowlab.rl_control.value_flows.agents import AgentConfig
from flowlab.rl_control.value_flows.benchmarks import CHAIN, CONTROL, ONLINE, REACHER
from flowlab.rl_control.value_flows.benchmarks.common import AgentRow


def _ctx(config, tmp_path) -> BenchContext:
    return BenchContext(0, "quick", config, torch.device("cpu"), torch.Generator().manual_seed(0), tmp_path, None)


def test_the_package_collects_every_scenario_with_typed_variants():
    """Misspelt fields and tables without our row are errors; the variants record every agent's full settings."""
    names = [s.name for s in SCENARIOS]
    assert names[:4] == [s.name for s in (CHAIN, CONTROL, REACHER, ONLINE)] and len(set(names)) == len(names)
    quick = CHAIN.variants["quick"]
    with pytest.raises(TypeError, match="stepz"):
        replace(quick, stepz=10)
    with pytest.raises(ValueError, match="agents"):
        replace(quick, agents=quick.agents[1:])  # no "value_flows" row
    with pytest.raises(ValueError, match="agents"):
        replace(quick, agents=(*quick.agents, AgentRow("extra", AgentConfig())))  # not the chain's policy evaluation
    with pytest.raises(ValueError, match="quality"):
        replace(CONTROL.variants["quick"], quality="good")
    ours = CONTROL.variants["quick"].to_dict()["agents"][0]
    expected = AgentConfig(method="value_flows", hidden=(64, 64), lr=1e-3, gamma=0.97, num_action_samples=8)
    assert ours == {"name": "value_flows", "agent": expected.to_dict()}


def test_chain_control_and_online_scenarios_run_end_to_end(tmp_path):
    """Tiny budgets: every agent row is present and finite (no online episode finishes in 30 steps)."""
    quick = CHAIN.variants["quick"]
    chain = replace(
        quick,
        n_transitions=2000,
        n_rollouts=50,
        n_model_samples=50,
        spread_eps=8,
        steps=10,
        workers=1,
        agents=(*quick.agents, AgentRow("c51_again", quick.agents[1].agent)),
    )
    res = CHAIN.run(_ctx(chain, tmp_path))
    assert set(res.baselines) == {"c51", "iqn", "c51_true_support", "c51_again"}
    assert all(math.isfinite(r["w1"]) for r in (res.metrics, *res.baselines.values()))
    assert all(-1 <= res.metrics[f"spearman_spread_{k}"] <= 1 for k in ("1eps", "mean", "rms"))
    quick = CONTROL.variants["quick"]
    control = replace(quick, n_transitions=300, steps=3, eval_episodes=2, workers=1, seeds=2, agents=quick.agents[:2])
    res = CONTROL.run(_ctx(control, tmp_path))
    assert set(res.baselines) == {"td_fql_style"} and res.metrics["random_return"] < res.metrics["controller_return"]
    assert all(
        math.isfinite(r["norm_return"]) and r["norm_return_std"] >= 0 for r in (res.metrics, *res.baselines.values())
    )
    online = replace(ONLINE.variants["quick"], n_transitions=500, steps=5, online_steps=30, eval_episodes=2)
    res = ONLINE.run(_ctx(online, tmp_path))
    assert set(res.baselines) == {"fql"}
    for row in (res.metrics, *res.baselines.values()):
        assert math.isfinite(row["norm_return_offline"]) and math.isfinite(row["norm_return_online"])
        assert math.isnan(row["online_episode_return"])  # Pendulum episodes last 200 steps
