"""The forecasting protocol: Social-GAN windowing, batched (block-diagonal) prediction equal to per-window
prediction, the goal model shared by training and forecasting, unclipped constant velocity."""

from __future__ import annotations

import pytest
import torch

from flowlab.crowd_sim.data import Window
from flowlab.crowd_sim.envsocial_diff.baselines import SocialForcePolicy, constant_velocity
from flowlab.crowd_sim.envsocial_diff.features import FeatureConfig
from flowlab.crowd_sim.envsocial_diff.forecast import evaluate_forecast, forecast_sequences, resample
from flowlab.crowd_sim.envsocial_diff.goals import anchored_goals
from flowlab.crowd_sim.envsocial_diff.model import EnvSocialConfig
from flowlab.crowd_sim.envsocial_diff.objective import training_frames
from flowlab.crowd_sim.envsocial_diff.predict import predict
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_categories
from flowlab.crowd_sim.envsocial_diff.train import TrainConfig, train
from flowlab.crowd_sim.physics import DestinationForce, SocialForceParams
from flowlab.crowd_sim.simulate import InitialStates, StepState, recorded_kinematics

SMALL = {"hist_hidden": 16, "hist_dim": 8, "social_hidden": 16, "env_dim": 8, "light_dim": 8, "head_hidden": (32,),
         "steps": 8, "beta_start": 1e-3, "beta_end": 0.5}  # fmt: skip


def _model(scene, **kw) -> EnvSocialDiff:
    torch.manual_seed(0)
    cfg = EnvSocialConfig(**{**SMALL, **kw}).with_ablation(
        "full", categories=scene_categories(scene), features=FeatureConfig(env_radius=20.0)
    )
    model = EnvSocialDiff(cfg)
    for p in model.denoiser.parameters():  # a random, non-trivial network (the head starts at zero)
        torch.nn.init.normal_(p, std=0.3)
    return model


def _histories(seed: int, n: int, origin: float) -> torch.Tensor:
    """(n, 8, 2) observed walks near (origin, origin), 0.4 m per frame, close enough to interact."""
    g = torch.Generator().manual_seed(seed)
    start = origin + 3 * torch.rand(n, 1, 2, generator=g)
    step = 0.4 * torch.nn.functional.normalize(torch.randn(n, 1, 2, generator=g), dim=-1)
    return start + step * torch.arange(8)[None, :, None]


def test_sequences_follow_social_gan_windowing():
    """Three pedestrians over 25 frames: 0 and 1 throughout, 2 from frame 3 on. With 8 + 12 frames there are six
    starts (0..5); pedestrian 2 completes the starts 3..5 only; every start has at least two pedestrians."""
    T, P = 25, 3
    positions = torch.arange(T, dtype=torch.float32)[:, None, None].expand(T, P, 2) * 0.1 + torch.arange(P)[:, None]
    mask = torch.ones(T, P, dtype=torch.bool)
    mask[:3, 2] = False
    w = Window("w", positions * mask[..., None], mask, positions[-1], 0.4, torch.tensor([7, 8, 9]))
    seq = forecast_sequences(w)
    assert seq.starts == (0, 1, 2, 3, 4, 5) and seq.windows == ("w",) * 6
    assert seq.groups.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5]
    assert seq.ped_ids.tolist()[6:9] == [7, 8, 9]
    torch.testing.assert_close(seq.history[6], positions[3:11, 0])
    torch.testing.assert_close(seq.future[8], positions[11:23, 2])
    assert forecast_sequences(w, min_pedestrians=3).starts == (3, 4, 5)
    assert forecast_sequences(w, skip=2).starts == (0, 2, 4)


def test_sequences_and_resampling_reject_what_does_not_fit(crossing):
    with pytest.raises(ValueError, match="no sequence"):
        forecast_sequences(crossing, observe=50, horizon=20)
    with pytest.raises(ValueError, match="skip"):
        forecast_sequences(crossing, skip=0)
    with pytest.raises(ValueError, match="whole multiple"):
        resample(crossing, 0.1)
    slow = resample(crossing)  # 0.08 s -> 0.4 s: every fifth frame
    assert slow.time_unit == pytest.approx(0.4) and slow.num_frames == 12
    torch.testing.assert_close(slow.positions[1], crossing.positions[5][crossing.mask[::5].any(0)])


def _batched_vs_alone(scene, policy, k: int = 3):
    a, b = _histories(0, 5, 0.0), _histories(1, 4, 0.0)  # the two windows overlap in space
    both = predict(scene, torch.cat([a, b]), k, model=policy, groups=torch.tensor([0] * 5 + [1] * 4), horizon=6)
    alone = [predict(scene, h, k, model=policy, horizon=6) for h in (a, b)]
    mixed = predict(scene, torch.cat([a, b]), k, model=policy, horizon=6)  # one group: they interact
    return both, torch.cat(alone, dim=1), mixed


def test_batched_social_force_equals_per_window_prediction(scene):
    sfm = SocialForcePolicy(scene, SocialForceParams(), DestinationForce())
    both, alone, mixed = _batched_vs_alone(scene, sfm)
    torch.testing.assert_close(both, alone, rtol=0, atol=1e-5)
    assert (mixed - alone).abs().max() > 1e-3  # the windows would push each other without the groups


def test_batched_model_inputs_equal_per_window_inputs(scene):
    """The model sees each window's pedestrians exactly as in a call of their own: same node, edge, environment
    inputs; the denoiser is a per-node map of them, so the same noise gives the same prediction (1e-5)."""
    model = _model(scene)
    hist = torch.cat([_histories(0, 5, 0.0), _histories(1, 4, 0.0)])
    groups = torch.tensor([0] * 5 + [1] * 4)

    def state(rows, grouped):
        h = hist[rows]
        v = (h[:, -1] - h[:, -2]) / scene.time_unit
        full = torch.cat([h, v[:, None].expand_as(h), torch.zeros_like(h)], dim=-1)
        alive = torch.ones(len(rows), dtype=torch.bool)
        return StepState(h[None, :, -1], v[None], torch.zeros_like(v)[None], full[None], alive,
                         h[:, -1] + 8 * v, 0, None, groups[rows] if grouped else None)  # fmt: skip

    env = model.environment(scene)
    batched, _ = model.inputs(state(torch.arange(9), True), env)
    parts = [model.inputs(state(rows, False), env)[0] for rows in (torch.arange(0, 5), torch.arange(5, 9))]
    offsets = [0, 5]
    edges = torch.cat([p.edge_index + o for p, o in zip(parts, offsets, strict=True)], dim=1)
    assert torch.equal(batched.edge_index, edges) and batched.edge_index.shape[1] > 0
    for name in ("node", "history", "edge_attr", "env", "light", "rotations"):
        torch.testing.assert_close(getattr(batched, name), torch.cat([getattr(p, name) for p in parts]))
    x, t = torch.randn(9, 2), torch.full((9,), 0.5)
    with torch.no_grad():
        eps = model.denoiser(x=x, t=t, cond=model.denoiser.encode(batched))
        eps_parts = [model.denoiser(x=x[r], t=t[r], cond=model.denoiser.encode(p))
                     for r, p in ((slice(0, 5), parts[0]), (slice(5, 9), parts[1]))]  # fmt: skip
    torch.testing.assert_close(eps, torch.cat(eps_parts), rtol=1e-5, atol=1e-5)  # float32 matmuls of other sizes


def test_a_window_forecast_does_not_depend_on_the_other_windows_of_its_batch(scene):
    """Same noise stream (same number of pedestrians), the second window moved onto the first: with groups the first
    window's samples stay identical; as one group they change."""
    policy = _model(scene, goal="constant_velocity").policy(scene, sampler="ddim", sample_steps=3)
    a, b = _histories(0, 5, 0.0), _histories(1, 4, 20.0)
    groups = torch.tensor([0] * 5 + [1] * 4)

    def first(other, grouped):
        gen = torch.Generator().manual_seed(3)
        out = predict(scene, torch.cat([a, other]), 2, model=policy, groups=groups if grouped else None, horizon=5,
                      generator=gen)  # fmt: skip
        return out[:, :5]

    apart = first(b, True)
    torch.testing.assert_close(first(b - 20.0, True), apart, rtol=0, atol=1e-5)
    assert (first(b - 20.0, False) - apart).abs().max() > 1e-4


def test_constant_velocity_forecast_is_exact_for_fast_walkers(scene):
    """A 3 m/s walker is faster than the scene's 2 m/s speed limit: the limit never slows a recorded speed."""
    h = torch.tensor([[0.0, 0.0], [0.24, 0.0]])[None]  # 0.24 m per 0.08 s frame
    out = predict(scene, h, 1, model=constant_velocity, horizon=10)
    torch.testing.assert_close(out[0, 0, :, 0], 0.24 + 0.24 * torch.arange(1, 11), rtol=0, atol=1e-5)


def test_goals_are_the_same_model_in_training_and_forecasting(scene, crossing):
    recorded = _model(scene).policy(scene, sampler="ddim", sample_steps=2)
    with pytest.raises(ValueError, match="recorded destinations"):
        predict(scene, _histories(0, 3, 0.0), 1, model=recorded)
    cv = _model(scene, goal="constant_velocity", goal_lookahead=4.0).policy(scene, sampler="ddim", sample_steps=2)
    with pytest.raises(ValueError, match="lookahead"):
        predict(scene, _histories(0, 3, 0.0), 1, model=cv, lookahead=8.0)
    # teacher forcing: frame t's goal is anchored at t - t % every (or the track's first frame), 4 s ahead
    kin = recorded_kinematics(crossing)
    goals = anchored_goals(kin, crossing.first_frame, 29, 12, 4.0)
    p, v, _ = kin
    anchor = crossing.first_frame.clamp_min(24)
    torch.testing.assert_close(goals, p[anchor, torch.arange(6)] + 4.0 * v[anchor, torch.arange(6)])
    model = _model(scene, goal="constant_velocity", goal_lookahead=4.0)
    frames = training_frames(model, scene, [crossing])
    by_recorded = training_frames(_model(scene), scene, [crossing])
    assert len(frames) == len(by_recorded) and not torch.allclose(frames[30].target, by_recorded[30].target)


def test_a_goal_trained_model_forecasts_sequences_in_one_call(scene, crossing):
    model = _model(scene, goal="constant_velocity", goal_every=4)
    train(model, scene, [crossing], TrainConfig(epochs=1, batch_frames=8, finetune_steps=2, horizon=3),
          generator=torch.Generator().manual_seed(0), progress=False)  # fmt: skip
    seq = forecast_sequences(crossing, observe=4, horizon=4, skip=10)
    out = evaluate_forecast(scene, seq, model.policy(scene, sampler="ddim", sample_steps=2), k=3,
                            generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert out["sequences"] == seq.num_sequences and out["pedestrians"] == len(seq.groups)
    assert 0 < out["min_ade"] < out["min_fde"] < 5


def test_bad_groups_are_rejected(scene):
    h = _histories(0, 3, 0.0)
    with pytest.raises(ValueError, match="groups"):
        predict(scene, h, 1, model=constant_velocity, groups=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="groups"):
        predict(scene, h, 1, model=constant_velocity, groups=torch.zeros(3))


def test_initial_states_keep_their_shapes_with_groups():
    init = InitialStates(torch.zeros(2, 2), torch.zeros(2, 2), torch.zeros(2, 3, 6), torch.zeros(2, dtype=torch.long),
                         torch.ones(2, dtype=torch.long))  # fmt: skip
    assert init.positions.shape == (2, 2)
