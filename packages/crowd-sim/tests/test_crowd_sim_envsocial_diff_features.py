"""Neighbour graph, similarities and environment tokens of the EnvSocial-Diff inputs."""

from __future__ import annotations

import math

import torch

from flowlab.crowd_sim.envsocial_diff.features import FeatureConfig, SceneEnvironment, neighbours, similarities


def _brute_force(pos, vel, batch, cfg):
    """Edges j -> i by a plain loop: same graph, within the radius, in i's sight cone, the k nearest."""
    edges = set()
    cos_limit = math.cos(math.radians(cfg.half_angle_deg))
    for i in range(len(pos)):
        cands = []
        for j in range(len(pos)):
            if i == j or batch[i] != batch[j]:
                continue
            d = float((pos[j] - pos[i]).norm())
            if d > cfg.ped_radius:
                continue
            speed = float(vel[i].norm())
            if speed >= cfg.standing_speed:
                cos = float((vel[i] @ (pos[j] - pos[i])) / (speed * d))
                if cos < cos_limit - 1e-6:
                    continue
            cands.append((d, j))
        for _, j in sorted(cands)[: cfg.ped_topk]:
            edges.add((j, i))
    return edges


def test_neighbour_graph_matches_a_brute_force_search():
    g = torch.Generator().manual_seed(0)
    pos = torch.rand(120, 2, generator=g) * 12
    vel = torch.randn(120, 2, generator=g)
    vel[::10] = 0.0  # standing pedestrians see all around
    batch = torch.arange(120) // 50  # three graphs
    for cfg in (FeatureConfig(), FeatureConfig(ped_radius=2.5, ped_topk=3, half_angle_deg=60.0)):
        edges = neighbours(pos, vel, batch, cfg)
        assert {tuple(e) for e in edges.T.tolist()} == _brute_force(pos, vel, batch, cfg)
        # sorted by target, then by distance, at most k per target
        src, dst = edges
        assert bool((dst[1:] >= dst[:-1]).all())
        d = (pos[src] - pos[dst]).norm(dim=-1)
        same = dst[1:] == dst[:-1]
        assert bool((d[1:][same] >= d[:-1][same]).all())
        assert int(torch.bincount(dst).max()) <= cfg.ped_topk


def test_sight_cone_excludes_pedestrians_behind():
    pos = torch.tensor([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    vel = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    edges = neighbours(pos, vel, torch.zeros(4, dtype=torch.long), FeatureConfig())
    into_0 = set(edges[0, edges[1] == 0].tolist())
    assert into_0 == {1, 3}  # ahead and at exactly 90 degrees are visible; behind is not


def test_similarities_are_in_unit_interval_with_the_stated_extremes():
    g = torch.Generator().manual_seed(2)
    pos, vel, acc = (torch.randn(40, 2, generator=g) for _ in range(3))
    edges = neighbours(pos, vel, torch.zeros(40, dtype=torch.long), FeatureConfig(ped_radius=10.0))
    for s in similarities(pos, vel, acc, edges):
        assert bool(((s >= 0) & (s <= 1)).all())
    # j at (2, 0) walks straight at i at the origin; both walk in parallel in the second pair
    pos = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 5.0], [1.0, 5.0]])
    vel = torch.tensor([[0.0, 1.0], [-1.0, 0.0], [0.0, 1.0], [0.0, 2.0]])
    edges = torch.tensor([[1, 3], [0, 2]])
    sim1, sim2, sim3 = similarities(pos, vel, torch.zeros(4, 2), edges)
    assert float(sim1[0]) == 1.0 and float(sim2[1]) == 1.0
    assert float(sim2[0]) == 0.5  # perpendicular velocities
    assert float(sim3[2]) == 1.0 and float(sim3[1]) == 0.5  # parallel group motion; no neighbours


def test_scene_transform_moves_boxes_and_cells():
    env = SceneEnvironment(
        corners=torch.zeros(1, 4, 2) + torch.tensor([1.0, 0.0]),
        centres=torch.tensor([[1.0, 0.0]]),
        kind=torch.zeros(1, dtype=torch.long),
        category=torch.zeros(1, dtype=torch.long),
        cells=torch.tensor([[0.0, 2.0]]),
        brightness=torch.tensor([0.5]),
    )
    rot = torch.tensor([[0.0, -1.0], [1.0, 0.0]])
    moved = env.transformed(rot, torch.tensor([1.0, 1.0]))
    torch.testing.assert_close(moved.centres, torch.tensor([[1.0, 2.0]]))
    torch.testing.assert_close(moved.cells, torch.tensor([[-1.0, 1.0]]))
