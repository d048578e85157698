"""Prediction mode: k joint futures per pedestrian, minADE/minFDE on recorded windows."""

from __future__ import annotations

import pytest
import torch

from flowlab.crowd_sim.envsocial_diff.baselines import constant_velocity
from flowlab.crowd_sim.envsocial_diff.predict import evaluate_prediction, predict, predict_window
from flowlab.crowd_sim.simulate import StepState, recorded_kinematics


def test_constant_velocity_prediction_extrapolates_the_last_step(scene):
    g = torch.Generator().manual_seed(0)
    history = torch.randn(5, 8, 2, generator=g).cumsum(1) * 0.05
    out = predict(scene, history, 3, model=constant_velocity, horizon=12)
    assert out.shape == (3, 5, 12, 2)
    step = history[:, -1] - history[:, -2]
    expect = history[:, -1, None] + step[:, None] * torch.arange(1, 13)[None, :, None]
    torch.testing.assert_close(out, expect.expand(3, -1, -1, -1), rtol=0, atol=1e-5)


def test_a_window_prediction_is_a_rollout_of_the_observed_pedestrians(scene, crossing):
    """All but pedestrian 2 (frames 6..49) are present at frames 46..50; constant velocity continues their last
    step."""
    out = predict_window(scene, crossing, constant_velocity, 2, start=50, observe=5, horizon=6)
    observed = torch.tensor([True, True, False, True, True, True])
    assert out.start == 50 and out.positions.shape == (2, 7, 6, 2) and torch.equal(out.mask, observed.expand(7, -1))
    p = crossing.positions[:, observed]
    expect = p[50] + (p[50] - p[49]) * torch.arange(7)[:, None, None]
    torch.testing.assert_close(out.positions[:, :, observed], expect.expand(2, -1, -1, -1), rtol=0, atol=1e-5)
    assert not out.positions[:, :, ~observed].any()


def test_replaying_the_recording_scores_zero_and_constant_velocity_does_not(scene, crossing):
    _, v, _ = recorded_kinematics(crossing)
    acc = torch.zeros_like(v)
    acc[:-1] = (v[1:] - v[:-1]) / crossing.time_unit

    def replay(state: StepState) -> torch.Tensor:
        return acc[state.frame].expand_as(state.positions)

    kw = {"k": 2, "observe": 3, "horizon": 4, "frame_step": 2, "stride": 5}
    exact = evaluate_prediction(scene, crossing, replay, **kw)
    assert exact["pred_pedestrians"] > 0 and exact["min_ade"] < 1e-4 and exact["min_fde"] < 1e-4
    cv = evaluate_prediction(scene, crossing, constant_velocity, **kw)
    assert cv["min_ade"] > 1e-3 and cv["min_fde"] > cv["min_ade"]


def test_prediction_rejects_bad_histories(scene, crossing):
    with pytest.raises(ValueError, match="history"):
        predict(scene, torch.zeros(5, 1, 2), 2, model=constant_velocity)
    with pytest.raises(ValueError, match="NaN"):
        predict(scene, torch.full((2, 4, 2), float("nan")), 2, model=constant_velocity)
    with pytest.raises(ValueError, match="k"):
        predict(scene, torch.zeros(2, 4, 2), 0, model=constant_velocity)
    with pytest.raises(ValueError, match="start"):
        predict_window(scene, crossing, constant_velocity, 1, start=2, observe=5)
    with pytest.raises(ValueError, match="observe, horizon"):
        predict_window(scene, crossing, constant_velocity, 1, horizon=60)
    with pytest.raises(ValueError, match="consecutive frames"):
        evaluate_prediction(scene, crossing, constant_velocity, observe=40, horizon=30, frame_step=1)
