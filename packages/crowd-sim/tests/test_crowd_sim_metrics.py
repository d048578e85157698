"""Crowd metrics against independent truth: zero on identical tracks, exact OT in the small-reg limit, a brute-force
DTW, scripted collisions, hand-computed MMD and forecasting errors."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.metrics import wasserstein
from flowlab.crowd_sim.metrics import (
    collisions,
    dtw,
    fde,
    mae,
    min_ade,
    min_fde,
    mmd,
    ot_sinkhorn,
    simulation_metrics,
)


def random_tracks(T: int = 20, P: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """real, sim (T, P, 2) random walks and a mask with staggered entries and exits."""
    g = torch.Generator().manual_seed(seed)
    real = torch.randn(T, P, 2, generator=g).cumsum(0)
    sim = real + 0.5 * torch.randn(T, P, 2, generator=g)
    first = torch.randint(0, T // 2, (P,), generator=g)
    last = torch.randint(T // 2, T, (P,), generator=g)
    frames = torch.arange(T).unsqueeze(1)
    return real, sim, (frames >= first) & (frames <= last)


def test_identical_tracks_score_zero():
    real, _, mask = random_tracks()
    sim = real.clone()
    sim[~mask] = float("nan")  # absent entries are never read
    assert mae(sim, real, mask) == 0
    assert fde(sim, real, mask) == 0
    assert dtw(sim, real, mask) == 0
    assert mmd(sim, real, mask) == pytest.approx(0, abs=1e-6)


def test_mae_and_fde_of_a_constant_offset():
    real, _, mask = random_tracks()
    sim = real + torch.tensor([0.3, 0.4])
    assert mae(sim, real, mask) == pytest.approx(0.5, rel=1e-5)
    assert fde(sim, real, mask) == pytest.approx(0.5, rel=1e-5)


def test_fde_reads_each_pedestrians_last_present_frame():
    real, _, mask = random_tracks()
    sim = real.clone()
    sim[~mask] += 100.0  # wrong only where the recorded pedestrian is absent
    assert fde(sim, real, mask) == 0


def test_sinkhorn_tends_to_exact_squared_w2():
    g = torch.Generator().manual_seed(1)
    real = torch.randn(2, 5, 2, generator=g, dtype=torch.float64)
    sim = torch.randn(2, 5, 2, generator=g, dtype=torch.float64) + 0.5
    mask = torch.ones(2, 5, dtype=torch.bool)
    exact = sum(float(wasserstein(sim[t], real[t], p=2)) ** 2 for t in range(2)) / 2
    assert ot_sinkhorn(sim, real, mask, reg=1e-3, iters=5000) == pytest.approx(exact, rel=1e-3)
    assert ot_sinkhorn(sim, real, mask) == pytest.approx(exact, rel=0.05)  # default reg 0.1 m^2, 100 iterations


def test_ot_uses_only_frames_with_two_present_pedestrians():
    real, sim, mask = random_tracks()
    lone = mask.clone()
    lone[0] = False
    lone[0, 0] = True  # frame 0 now has a single pedestrian: skipped
    sim_far = sim.clone()
    sim_far[0, 0] += 1000.0
    assert ot_sinkhorn(sim_far, real, lone) == pytest.approx(ot_sinkhorn(sim, real, lone), rel=1e-9)


def test_mmd_of_two_point_masses_by_hand():
    # x = two points at the origin, y = two at (1, 0): pooled squared distances sum to 8 over 4 * 4 - 4 pairs,
    # base bandwidth 8 / 12 / 2**2 = 1/6, kernels exp(-d^2 / (2**i / 6)); MMD^2 = 5 + 5 - 2 sum_i exp(-6 / 2**i)
    sim = torch.zeros(1, 2, 2)
    real = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])
    expected = 10 - 2 * sum(math.exp(-6 / 2**i) for i in range(5))
    assert mmd(sim, real, torch.ones(1, 2, dtype=torch.bool)) == pytest.approx(expected, rel=1e-5)


def test_dtw_of_a_time_shifted_copy_is_zero():
    path = torch.stack([torch.linspace(0, 5, 10), torch.zeros(10)], 1)  # (10, 2)
    real = torch.cat([path, path[-1:].expand(3, 2)])  # walks, then waits 3 frames at the end
    sim = torch.cat([path[:1].expand(3, 2), path])  # waits 3 frames at the start, then walks
    mask = torch.ones(13, 1, dtype=torch.bool)
    assert dtw(sim.unsqueeze(1), real.unsqueeze(1), mask) == 0
    assert mae(sim.unsqueeze(1), real.unsqueeze(1), mask) > 1


def test_dtw_of_a_sideways_offset_is_the_offset():
    real, _, mask = random_tracks()
    real[..., 1] = 0.0  # tracks on the x axis: every cell of a sideways copy costs at least the offset
    assert dtw(real + torch.tensor([0.0, 0.7]), real, mask) == pytest.approx(0.7, rel=1e-5)


def brute_force_dtw(a: torch.Tensor, b: torch.Tensor) -> float:
    n, m = len(a), len(b)
    D = [[math.inf] * (m + 1) for _ in range(n + 1)]
    D[0][0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            D[i][j] = float((a[i - 1] - b[j - 1]).norm()) + min(D[i - 1][j], D[i][j - 1], D[i - 1][j - 1])
    return D[n][m] / n


def test_dtw_matches_a_brute_force_table_per_pedestrian():
    real, sim, mask = random_tracks(T=16, P=5, seed=3)
    mask[6:9, 2] = False  # a gap: DTW runs over the present frames
    expected = sum(brute_force_dtw(sim[mask[:, p], p], real[mask[:, p], p]) for p in range(5)) / 5
    assert dtw(sim, real, mask) == pytest.approx(expected, rel=1e-5)


def crossing(T: int = 81, lateral: float = 0.3) -> torch.Tensor:
    """Two pedestrians walking head-on along the x axis at 0.1 m per frame, `lateral` metres apart sideways,
    meeting at frame 40 (closer than 0.5 m for |x| < 0.2, frames 39-41)."""
    x = torch.linspace(-4, 4, T)
    return torch.stack([torch.stack([x, torch.zeros(T)], 1), torch.stack([-x, torch.full((T,), lateral)], 1)], 1)


def test_head_on_crossing_is_one_collision_event():
    positions = crossing()
    mask = torch.ones(81, 2, dtype=torch.bool)
    assert collisions(positions, mask) == 1
    assert collisions(positions, mask, threshold=0.2) == 0  # they never come closer than 0.3 m


def test_two_separate_approaches_are_two_events():
    positions = torch.cat([crossing(), crossing().flip(0)])  # cross, then walk back and cross again
    mask = torch.ones(162, 2, dtype=torch.bool)
    assert collisions(positions, mask) == 2
    mask[40, 1] = False  # leaving in the middle of the first crossing splits it into two events
    assert collisions(positions, mask) == 3
    mask[:, 1] = False
    assert collisions(positions, mask) == 0


def test_collisions_equal_a_brute_force_count_frame_by_frame():
    g = torch.Generator().manual_seed(3)
    for trial in range(6):
        T, P = 30, 25
        positions = 2.0 * torch.rand(T, P, 2, generator=g) + 0.2 * torch.randn(T, P, 2, generator=g).cumsum(0)
        mask = torch.rand(T, P, generator=g) < 0.8
        groups = torch.randint(0, 3, (P,), generator=g) if trial % 2 else torch.zeros(P, dtype=torch.long)
        events, before = 0, set()
        for t in range(T):
            close = {
                (i, j)
                for i in range(P)
                for j in range(i + 1, P)
                if mask[t, i] and mask[t, j] and groups[i] == groups[j]
                and float((positions[t, i] - positions[t, j]).norm()) < 0.5
            }  # fmt: skip
            events, before = events + len(close - before), close
        assert events > 0
        assert collisions(positions, mask, groups=None if trial % 2 == 0 else groups) == events
    assert collisions(positions, torch.zeros(T, P, dtype=torch.bool)) == 0


def test_min_ade_and_min_fde_pick_the_best_sample():
    true = torch.randn(3, 12, 2, generator=torch.Generator().manual_seed(0))
    pred = true.expand(4, 3, 12, 2) + torch.tensor([1.0, 2.0, 3.0, 4.0]).view(4, 1, 1, 1)
    pred = pred.clone()
    pred[2, 0] = true[0]  # pedestrian 0 is matched exactly by sample 2, the others at best by sample 0
    assert min_ade(pred, true) == pytest.approx(2 * math.sqrt(2) / 3, rel=1e-5)
    pred[1, 1, :-1] += 10.0  # sample 1 is far from pedestrian 1 except at the final step
    pred[1, 1, -1] = true[1, -1]
    assert min_fde(pred, true) == pytest.approx(math.sqrt(2) / 3, rel=1e-5)


def test_simulation_metrics_has_every_metric():
    real, sim, mask = random_tracks()
    out = simulation_metrics(sim, real, mask)
    assert set(out) == {"mae", "ot", "mmd", "dtw", "fde", "collisions"}
    assert out["mae"] == mae(sim, real, mask) and out["collisions"] == collisions(sim, mask)
    assert all(math.isfinite(v) and v >= 0 for v in out.values())


def test_bad_inputs_raise():
    real, sim, mask = random_tracks()
    with pytest.raises(ValueError, match="shapes differ"):
        mae(sim[:, :3], real, mask)
    with pytest.raises(ValueError, match="mask"):
        mae(sim, real, mask.float())
    with pytest.raises(ValueError, match="mask"):
        ot_sinkhorn(sim, real, mask[:, :3])
    with pytest.raises(ValueError, match=r"\(T, P, 2\)"):
        dtw(sim[..., :1], real[..., :1], mask)
    bad = sim.clone()
    t, p = (int(i) for i in mask.nonzero()[0])
    bad[t, p, 0] = float("nan")
    with pytest.raises(ValueError, match=f"frame {t}, pedestrian {p}"):
        mmd(bad, real, mask)
    with pytest.raises(ValueError, match="no pedestrian"):
        mae(sim, real, torch.zeros_like(mask))
    with pytest.raises(ValueError, match="threshold"):
        collisions(sim, mask, threshold=0)
    with pytest.raises(ValueError, match=r"\(k, P, H, 2\)"):
        min_ade(torch.zeros(2, 3, 12, 2), torch.zeros(4, 12, 2))
