"""The smoke suite inside `uv run pytest`: every registered scenario's "smoke" variant (toy size, <= 20 s on the
2-core machine), one test per scenario, through the runner's own `run_one`. Ours and every baseline must return
finite metrics, so a broken scenario fails CI instead of the next person's `flowlab bench`. Artifacts are built into
a fresh cache for the session, so their builders run too. Select one package with `-k mol`."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from flowlab.core.bench import INFRASTRUCTURE
from flowlab.tools.bench.case import run_one
from flowlab.tools.bench.discovery import discover

SMOKE_SECONDS = 20.0
DISCOVERY = discover()
SCENARIOS = {s.name: s for s in DISCOVERY.scenarios}


@pytest.fixture(scope="module")
def smoke_cache(tmp_path_factory):
    """A fresh `$FLOWLAB_CACHE` for the session: smoke artifacts are built here, never into the user's cache. The
    pytest-xdist workers of one session share it (the cache's lock builds each artifact once)."""
    base = tmp_path_factory.getbasetemp()
    cache = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "smoke-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWLAB_CACHE", str(cache))
        yield


def test_every_scenario_package_loads():
    assert DISCOVERY.failures == {}
    assert len(SCENARIOS) >= 20


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_declares_its_smoke_size_and_expected_times(name):
    scenario = SCENARIOS[name]
    assert "smoke" in scenario.variants, f"{name}: no smoke variant"
    assert set(scenario.expected_seconds) == set(scenario.variants), f"{name}: expected_seconds per variant"
    assert scenario.expected_seconds["smoke"] <= SMOKE_SECONDS


def test_every_method_has_exactly_one_headline_case_with_a_claim():
    """Every method (package, method) has one headline case, the default suite's; infrastructure scenarios (the
    vision kit, the CLI) have none and are not methods."""
    methods: dict[tuple[str, str], list[str]] = {}
    for s in SCENARIOS.values():
        if s.headline:
            methods.setdefault((s.package, s.method), []).append(s.name)
            assert s.claim is not None, f"{s.name}: a headline case states the claim it checks"
    every = {(s.package, s.method) for s in SCENARIOS.values() if INFRASTRUCTURE not in s.tags}
    assert {("vision", "kit"), ("tools", "flowlab CLI")}.isdisjoint(every)
    assert set(methods) == every, f"methods without a headline case: {sorted(every - set(methods))}"
    assert all(len(v) == 1 for v in methods.values()), {k: v for k, v in methods.items() if len(v) > 1}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_smoke_variant_runs_and_ours_and_every_baseline_are_finite(name, smoke_cache, tmp_path):
    scenario = SCENARIOS[name]
    if "smoke" not in scenario.variants:
        pytest.fail(f"{name}: no smoke variant")
    root = os.environ.get("FLOWLAB_DATA")
    record = run_one(
        scenario,
        seed=0,
        variant="smoke",
        device=torch.device("cpu"),
        out_dir=tmp_path,
        data_root=Path(root) if root else None,
    )
    if record.status == "skipped":
        pytest.skip(record.message)
    assert record.status == "ok", f"{record.message}\n{record.config.get('traceback', '')}"
    assert record.metrics, "no metrics"
    tables = {"ours": record.metrics, **record.baselines}
    bad = {who: [k for k, v in m.items() if not math.isfinite(v)] for who, m in tables.items()}
    assert not any(bad.values()), f"non-finite metrics: { {k: v for k, v in bad.items() if v} }"
    assert all(record.baselines.values()), "a baseline with no metrics"
