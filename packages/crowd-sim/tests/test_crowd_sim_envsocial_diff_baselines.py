"""The physics baselines as simulation policies: social force (equivariant, calibrated on a grid) and constant
velocity."""

from __future__ import annotations

import math

import torch

from flowlab.crowd_sim.envsocial_diff.baselines import SocialForcePolicy, calibrate_social_force, constant_velocity
from flowlab.crowd_sim.physics import DestinationForce, SocialForceParams
from flowlab.crowd_sim.simulate import InitialStates, simulate


def _rollout(scene, window, policy, rotation, shift):
    init = InitialStates.from_window(window)

    def move(x):
        return x @ rotation.T + shift

    def turn(x):
        return x @ rotation.T

    hist = init.history.clone()
    hist[..., 0:2], hist[..., 2:4], hist[..., 4:6] = move(hist[..., 0:2]), turn(hist[..., 2:4]), turn(hist[..., 4:6])
    moved = InitialStates(move(init.positions), turn(init.velocities), hist, init.entry, init.exit)
    return simulate(scene, moved, move(window.destinations), window.num_frames - 1, model=policy).positions[0]


def test_social_force_rollout_rotates_and_translates_with_the_scene(scene_factory, crossing):
    scene = scene_factory()
    angle = 0.7
    rotation = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
    shift = torch.tensor([3.0, -2.0])
    base = _rollout(scene, crossing, SocialForcePolicy(scene, SocialForceParams(), DestinationForce()), torch.eye(2), 0)
    moved_scene = scene_factory()
    moved_boxes = scene.obstacles.corners @ rotation.T + shift
    object.__setattr__(moved_scene.obstacles, "corners", moved_boxes)
    policy = SocialForcePolicy(moved_scene, SocialForceParams(), DestinationForce())
    moved = _rollout(moved_scene, crossing, policy, rotation, shift)
    mask = crossing.mask
    torch.testing.assert_close(moved[mask], (base @ rotation.T + shift)[mask], rtol=0, atol=1e-4)


def test_constant_velocity_keeps_straight_lines(scene, crossing):
    init = InitialStates.from_window(crossing)
    traj = simulate(scene, init, crossing.destinations, crossing.num_frames - 1, model=constant_velocity)
    for p in range(crossing.num_pedestrians):
        frames = crossing.mask[:, p].nonzero().flatten()
        f0 = int(frames[0])
        expect = init.positions[p] + (frames - f0)[:, None] * 0.08 * init.velocities[p]
        torch.testing.assert_close(traj.positions[0, frames, p], expect, rtol=0, atol=1e-4)
    assert torch.equal(traj.mask, crossing.mask)


def test_social_force_calibration_returns_the_best_grid_point(scene, crossing):
    params, scores = calibrate_social_force(scene, crossing, DestinationForce(), A=(1.0, 2.1), B=(0.2, 0.3), frames=30)
    assert len(scores) == 4 and scores[(params.A, params.B)] == min(scores.values())
