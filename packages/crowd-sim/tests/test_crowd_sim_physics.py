"""Physics outside the diffusion (destination force, integration, social forces), the box geometry and what a
simulation policy sees."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.crowd_sim.geometry import closest_points_on_boxes
from flowlab.crowd_sim.physics import (
    DestinationForce,
    SocialForceParams,
    calibrate_destination_force,
    integrate,
    social_force,
)
from flowlab.crowd_sim.simulate import InitialStates, StepState, recorded_kinematics, simulate


def _lone(dt: float, steps: int, force: DestinationForce):
    """Speed along the destination direction of one pedestrian starting at rest, destination force only."""
    p, v = torch.zeros(1, 2, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64)
    g = torch.tensor([[1e6, 0.0]], dtype=torch.float64)
    speeds = []
    for _ in range(steps):
        p, v = integrate(p, v, force(p, v, g), dt, max_speed=10.0)
        speeds.append(float(v[0, 0]))
    return torch.tensor(speeds, dtype=torch.float64)


def test_destination_force_relaxes_exponentially_to_the_desired_speed():
    force = DestinationForce(v_des=1.3, tau=0.5)
    # the Euler recursion exactly: v_k = v_des (1 - (1 - dt / tau)^k)
    k = torch.arange(1, 101, dtype=torch.float64)
    torch.testing.assert_close(_lone(0.08, 100, force), 1.3 * (1 - (1 - 0.08 / 0.5) ** k), rtol=0, atol=1e-12)
    # and the continuous relaxation v(t) = v_des (1 - exp(-t / tau)) as dt -> 0, to 1e-3
    dt, n = 1e-3, 3000
    exact = 1.3 * (1 - torch.exp(-torch.arange(1, n + 1, dtype=torch.float64) * dt / 0.5))
    assert float((_lone(dt, n, force) - exact).abs().max()) < 1e-3


def test_integration_replays_recorded_accelerations_exactly(crossing):
    p, v, a_prev = recorded_kinematics(crossing)
    mask = crossing.mask
    for t in range(5, 40):
        both = mask[t] & mask[t + 1] & mask[t + 2]
        a_t = (v[t + 1] - v[t]) / crossing.time_unit
        p1, v1 = integrate(p[t], v[t], a_t, crossing.time_unit, max_speed=10.0)
        torch.testing.assert_close(p1[both], p[t + 1][both], rtol=0, atol=1e-5)
        torch.testing.assert_close(v1[both], v[t + 1][both], rtol=0, atol=1e-4)
        torch.testing.assert_close(a_prev[t + 1][both], a_t[both])


def test_speed_is_clipped():
    _, v = integrate(torch.zeros(1, 2), torch.tensor([[1.9, 0.0]]), torch.tensor([[10.0, 0.0]]), 0.08, 2.0)
    assert float(v.norm()) == pytest.approx(2.0)


def test_calibration_recovers_a_known_destination_force():
    g = torch.Generator().manual_seed(0)
    p, v = torch.randn(500, 2, generator=g) * 5, torch.randn(500, 2, generator=g)
    dest = torch.randn(500, 2, generator=g) * 20
    truth = DestinationForce(v_des=1.4, tau=0.7)
    a = truth(p, v, dest) + 0.01 * torch.randn(500, 2, generator=g)
    fit = calibrate_destination_force(p, v, a, dest)
    assert fit.v_des == pytest.approx(1.4, abs=0.02) and fit.tau == pytest.approx(0.7, abs=0.02)
    with pytest.raises(ValueError, match="non-physical"):
        calibrate_destination_force(p, v, -a, dest)


def test_closest_points_on_boxes_match_a_dense_outline(make_box):
    corners = torch.stack([make_box(0, 0, 2, 1, 0.4), make_box(3, 1, 1, 3, -1.0)])
    points = torch.randn(50, 2, generator=torch.Generator().manual_seed(1)) * 3
    closest, inside = closest_points_on_boxes(points, corners)
    s = torch.linspace(0, 1, 2001)[None, :, None]
    for m in range(2):
        a, b = corners[m], corners[m].roll(-1, 0)  # (4, 2) edges a -> b
        outline = (a[:, None] + s * (b - a)[:, None]).reshape(-1, 2)  # (4 * 2001, 2)
        d = torch.cdist(points, outline).min(dim=1).values
        torch.testing.assert_close((closest[:, m] - points).norm(dim=-1), d, rtol=0, atol=3e-3)
    # inside <=> the point is a convex combination: check with the box frame of the axis-aligned-by-rotation box
    centre = torch.tensor([0.0, 0.0])
    c, s_ = math.cos(0.4), math.sin(0.4)
    local = (points - centre) @ torch.tensor([[c, -s_], [s_, c]])
    expect = (local[:, 0].abs() <= 1) & (local[:, 1].abs() <= 0.5)
    assert torch.equal(inside[:, 0], expect)


def test_social_force_repels_pedestrians_and_obstacles(make_box):
    pos = torch.tensor([[[0.0, 0.0], [0.5, 0.0]]])
    vel = torch.zeros(1, 2, 2)
    dest = torch.tensor([[0.0, 0.0], [0.5, 0.0]])  # at their destinations: no driving force
    alive = torch.tensor([True, True])
    params = SocialForceParams()
    f = social_force(pos, vel, dest, alive, torch.zeros(0, 4, 2), destination_force=DestinationForce(), params=params)
    expect = params.A * math.exp((params.r - 0.5) / params.B)
    torch.testing.assert_close(f[0], torch.tensor([[-expect, 0.0], [expect, 0.0]]))
    wall = make_box(0.0, 1.0, 4.0, 1.0)[None]  # lower edge at y = 0.5
    f = social_force(
        pos[:, :1], vel[:, :1], dest[:1], alive[:1], wall, destination_force=DestinationForce(), params=params
    )
    torch.testing.assert_close(f[0, 0], torch.tensor([0.0, -params.A_obs * math.exp(-0.5 / params.B_obs)]))
    dead = social_force(
        pos, vel, dest, torch.tensor([True, False]), wall, destination_force=DestinationForce(), params=params
    )
    assert torch.equal(dead[0, 1], torch.zeros(2))


def test_policy_sees_only_previous_accelerations(scene, crossing):
    """History rows hold (p_f, v_f, a_{f-1}): the last row's acceleration is the one applied a frame earlier."""
    seen = []

    def spy(state: StepState) -> torch.Tensor:
        seen.append(state.history[0, :, -1, 4:6].clone())
        return torch.full_like(state.positions, 0.25)

    simulate(scene, InitialStates.from_window(crossing), crossing.destinations, 12, model=spy)
    alive = crossing.mask[10] & crossing.mask[11]  # the policy ran at frame 10 and sees its output at frame 11
    assert bool(alive.any())
    torch.testing.assert_close(seen[11][alive], torch.full((int(alive.sum()), 2), 0.25))
    torch.testing.assert_close(seen[0], torch.zeros_like(seen[0]))  # nothing applied before the first frame
