"""The crowd scenarios: registered through the package's entry point with typed smoke/quick/full variants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from flowlab.crowd_sim.benchmarks import SCENARIOS
from flowlab.crowd_sim.envsocial_diff.benchmarks import FORECAST
from flowlab.crowd_sim.envsocial_diff.model import SIZES
from flowlab.crowd_sim.envsocial_diff.settings import (
    FORECAST_FULL,
    FORECAST_QUICK,
    FORECAST_SMOKE,
    FULL,
    QUICK,
    SMOKE,
    EnvSocialBench,
    ForecastBench,
)
from flowlab.crowd_sim.envsocial_diff.train import TrainConfig


def test_scenarios_are_registered_with_every_variant_and_one_headline():
    assert {s.name for s in SCENARIOS} == {"crowd.envsocial.ucy", "crowd.envsocial.gc", "crowd.envsocial.forecast"}
    for s in SCENARIOS:
        assert set(s.expected_seconds) == set(s.variants) == {"smoke", "quick", "full"}
        if s is not FORECAST:
            assert s.variants == {"smoke": SMOKE, "quick": QUICK, "full": FULL} and s.directions["mae"] == "min"
    # one method, one headline (the paper's simulation claim, UCY); the forecasting protocol runs in --suite quick
    assert [s.name for s in SCENARIOS if s.headline] == ["crowd.envsocial.ucy"]
    assert {s.method for s in SCENARIOS} == {"envsocial"}
    assert FORECAST.variants == {"smoke": FORECAST_SMOKE, "quick": FORECAST_QUICK, "full": FORECAST_FULL}
    assert (FORECAST_QUICK.observe, FORECAST_QUICK.horizon, FORECAST_QUICK.k) == (8, 12, 20)
    # quick and full read every window whole and score prediction at 0.4 s; only smoke cuts them
    assert QUICK.window_frames is FULL.window_frames is None and QUICK.pred_frame_step == FULL.pred_frame_step == 5
    assert SMOKE.window_frames and SMOKE.train.epochs < QUICK.train.epochs


def test_variants_are_typed_and_read_back_from_their_records():
    assert isinstance(QUICK.model, type(SIZES["quick"])) and isinstance(QUICK.train, TrainConfig)
    for variant in (SMOKE, QUICK, FULL):
        assert EnvSocialBench.from_mapping(variant.to_dict()) == variant  # the results.jsonl `config` field
    for variant in (FORECAST_SMOKE, FORECAST_QUICK, FORECAST_FULL):
        assert ForecastBench.from_mapping(variant.to_dict()) == variant
    with pytest.raises(ValueError, match="replica"):
        EnvSocialBench.from_mapping({**QUICK.to_dict(), "replica": 3})
    with pytest.raises(ValueError, match="sampler"):
        replace(QUICK, sampler="euler")
    with pytest.raises(ValueError, match="ablations"):
        replace(QUICK, ablations=("spdiff",))
    with pytest.raises(ValueError, match="not both 0"):
        replace(QUICK, train=replace(QUICK.train, epochs=0, finetune_steps=0))
