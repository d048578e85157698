"""The weighted epsilon loss of EnvSocial-Diff's residual targets."""

from __future__ import annotations

import io
from dataclasses import fields, replace

import pytest
import torch

from flowlab.crowd_sim.envsocial_diff.model import EnvSocialConfig
from flowlab.crowd_sim.envsocial_diff.objective import (
    FrameBatch,
    concat,
    epsilon_loss,
    pack_frames,
    training_frames,
    unpack_frames,
)
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_categories
from flowlab.crowd_sim.envsocial_diff.train import calibrate

SMALL = {"hist_hidden": 8, "hist_dim": 8, "social_hidden": 8, "env_dim": 8, "head_hidden": (16,), "steps": 6}


def _batch(scene, crossing) -> tuple[EnvSocialDiff, FrameBatch]:
    torch.manual_seed(0)
    model = EnvSocialDiff(EnvSocialConfig(**SMALL).with_ablation("no_env", categories=scene_categories(scene)))
    for p in model.denoiser.parameters():  # a non-trivial network (the head starts at zero)
        torch.nn.init.normal_(p, std=0.3)
    calibrate(model, [crossing])
    return model, concat(training_frames(model, scene, [crossing], stride=7))


def _loss(model, batch, seed=0):
    with torch.no_grad():
        return epsilon_loss(model.denoiser, batch, torch.Generator().manual_seed(seed), model.schedule)


def test_pedestrians_without_a_valid_target_do_not_count(scene, crossing):
    model, batch = _batch(scene, crossing)
    n = batch.weight.shape[0]
    weight = (torch.arange(n) % 3 != 0).float()
    kept = replace(batch, weight=weight)
    moved = replace(kept, target=torch.where(weight[:, None] > 0, batch.target, batch.target + 5.0))
    loss, logs = _loss(model, kept)
    assert float(loss) > 0 and float(logs["targets"]) == float(weight.sum())
    assert torch.equal(_loss(model, moved)[0], loss)


def test_loss_is_a_weighted_mean_drawn_from_the_generator(scene, crossing):
    model, batch = _batch(scene, crossing)
    loss = _loss(model, batch)[0]
    torch.testing.assert_close(_loss(model, replace(batch, weight=3 * batch.weight))[0], loss)
    assert torch.equal(_loss(model, batch)[0], loss) and not torch.equal(_loss(model, batch, seed=1)[0], loss)


def test_packed_frames_survive_a_weights_only_round_trip_exactly(scene, crossing):
    model = EnvSocialDiff(EnvSocialConfig(**SMALL).with_ablation("full", categories=scene_categories(scene)))
    calibrate(model, [crossing])
    frames = training_frames(model, scene, [crossing], stride=3)
    assert len({f.inputs.num_nodes for f in frames}) > 1 and sum(f.inputs.edge_index.shape[1] for f in frames) > 0
    buffer = io.BytesIO()
    torch.save(pack_frames(frames), buffer)
    buffer.seek(0)
    back = unpack_frames(torch.load(buffer, weights_only=True))
    assert len(back) == len(frames)
    for a, b in zip(frames, back, strict=True):
        for f in fields(a.inputs):
            x, y = getattr(a.inputs, f.name), getattr(b.inputs, f.name)
            assert x.dtype == y.dtype and torch.equal(x, y), f.name
        assert torch.equal(a.target, b.target) and torch.equal(a.weight, b.weight)
    with pytest.raises(ValueError, match=r"^frames: "):
        pack_frames([])
