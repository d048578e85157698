"""Crowd-simulation metrics: simulated vs recorded positions over a window, and forecasting minADE/minFDE.

Simulation metrics take sim, real: (T, P, 2) positions and mask: (T, P) bool, True where the *recorded* pedestrian
is present; only present entries are read (absent ones may hold anything, NaN included). The distributional metrics
(OT, MMD) follow the SPDiff/EnvSocial-Diff metric definitions so that numbers compare with the papers': per frame,
over the pedestrians present, averaged over the frames that have at least two present pedestrians.
"""

from __future__ import annotations

import math

import torch

from flowlab.core.metrics import sinkhorn_distance_batched
from flowlab.core.metrics.mmd import mmd as core_mmd
from flowlab.core.nets import radius_graph
from flowlab.core.validation import check_tensor
from flowlab.crowd_sim.data import _check_mask, present_range

__all__ = ["collisions", "dtw", "fde", "mae", "min_ade", "min_fde", "mmd", "ot_sinkhorn", "simulation_metrics"]

_MIN_CROWD = 2  # pedestrians a frame needs to count in OT and MMD (as in the SPDiff metric code)


def mae(sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean L2 position error (m) over the present (frame, pedestrian) entries."""
    _check_tracks(sim, real, mask)
    return float((sim[mask] - real[mask]).norm(dim=-1).mean())


def fde(sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean over pedestrians of the L2 error (m) at each pedestrian's last present frame."""
    _check_tracks(sim, real, mask)
    last = present_range(mask)[1]
    seen = mask.any(0)
    columns = torch.arange(mask.shape[1], device=mask.device)
    return float((sim[last, columns] - real[last, columns]).norm(dim=-1)[seen].mean())


def ot_sinkhorn(
    sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor, *, reg: float = 0.1, iters: int = 100
) -> float:
    """Per-frame entropic OT between the simulated and recorded crowds, averaged over frames with >= 2 pedestrians.

    Uniform weights; ground cost the squared Euclidean distance |x - y|^2 (m^2), reg in the same units; the value
    is the transport cost <G_reg, C> of the Sinkhorn plan (log-domain, `iters` iterations), without the entropy
    term, so it tends to the exact squared 2-Wasserstein distance W_2^2 as reg -> 0. Computed in float64 through
    `flowlab.core.metrics.sinkhorn_distance_batched` (POT's log-domain iterations, all frames at once).
    """
    _check_tracks(sim, real, mask)
    if not (isinstance(iters, int) and iters >= 1):
        raise ValueError(f"iters: expected a positive number of Sinkhorn iterations, got {iters!r}")
    crowded = mask.sum(1) >= _MIN_CROWD
    m = mask[crowded]
    # pack each frame's present pedestrians to the front: width = the largest crowd, not the window's pedestrians
    order = torch.argsort((~m).to(torch.uint8), dim=1, stable=True)[:, : int(m.sum(1).max())]
    m = torch.gather(m, 1, order)
    idx = order[..., None].expand(-1, -1, 2)
    x = torch.where(m[..., None], torch.gather(sim[crowded], 1, idx), 0).double()
    y = torch.where(m[..., None], torch.gather(real[crowded], 1, idx), 0).double()
    cost = sinkhorn_distance_batched(x, y, reg=reg, p=2, x_mask=m, y_mask=m, num_iter=iters).square()
    return float(cost.mean())


def mmd(
    sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor, *, kernel_mul: float = 2.0, kernel_num: int = 5
) -> float:
    """Per-frame Gaussian multi-kernel MMD^2 (biased V-statistic), averaged over frames with >= 2 pedestrians.

    As in the SPDiff metric code: with L2 the squared distances within the pooled sample x ∪ y (n points), the base
    bandwidth is sum(L2) / (n^2 - n) / kernel_mul**(kernel_num // 2) and the kernel is
    sum_i exp(-L2 / (base * kernel_mul**i)), i < kernel_num; MMD^2 = mean(K_xx) + mean(K_yy) - 2 mean(K_xy).
    """
    _check_tracks(sim, real, mask)
    if not (isinstance(kernel_mul, int | float) and math.isfinite(kernel_mul) and kernel_mul > 0):
        raise ValueError(f"kernel_mul: expected a positive bandwidth ratio, got {kernel_mul!r}")
    if not (isinstance(kernel_num, int) and kernel_num >= 1):
        raise ValueError(f"kernel_num: expected a positive number of kernels, got {kernel_num!r}")
    values = [_frame_mmd(sim[t, m], real[t, m], kernel_mul, kernel_num) for t, m in _crowded_frames(mask)]
    return float(torch.stack(values).mean())


def dtw(sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor) -> float:
    """Dynamic time warping between each pedestrian's simulated and recorded track, averaged over pedestrians.

    Per pedestrian, over its n present frames: the classic cumulative DTW cost (L2 ground cost, steps (1, 0),
    (0, 1), (1, 1), path from the first to the last points of both tracks), divided by n (so m per frame).
    All pedestrians advance together along the anti-diagonals of the DTW table.
    """
    _check_tracks(sim, real, mask)
    seen = mask.any(0)
    x, y, n = _compact(sim[:, seen], mask[:, seen]), _compact(real[:, seen], mask[:, seen]), mask[:, seen].sum(0)
    return float((_dtw_cost(x, y, n) / n).mean())


def collisions(
    positions: torch.Tensor, mask: torch.Tensor, *, threshold: float = 0.5, groups: torch.Tensor | None = None
) -> int:
    """Collision events: pairs (i < j), both present, closer than `threshold` (m), counted once per contiguous run
    of frames in which they stay closer (a pair that separates, or leaves, and comes close again counts again).

    positions: (T, P, 2); mask: (T, P) bool; groups: (P,) long, pedestrians of different groups never collide
    (None: one group). The close pairs of every frame come from one call of the core's `radius_graph` (a graph per
    frame and group), linear in the present entries.
    """
    _check_positions(positions, "positions")
    _check_mask(mask, positions.shape[:2])
    _check_present_finite(positions, mask, "positions")
    if not (isinstance(threshold, int | float) and math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold: expected a positive distance in metres, got {threshold!r}")
    P = mask.shape[1]
    group = torch.zeros(P, dtype=torch.long) if groups is None else groups.to(dtype=torch.long)
    t, p = mask.nonzero(as_tuple=True)
    if t.numel() == 0:
        return 0
    group = group.to(mask.device)[p]
    src, dst = radius_graph(positions[t, p].float(), threshold, batch=t * (int(group.max()) + 1) + group)
    i, j = p[dst], p[src]
    near = (i < j) & ((positions[t[dst], i] - positions[t[dst], j]).norm(dim=-1) < threshold)
    key = (t[dst][near] * P + i[near]) * P + j[near]  # (frame, i, j) of each close pair
    return int((~torch.isin(key - P * P, key)).sum())  # not close in the frame before: a new event


def min_ade(pred: torch.Tensor, true: torch.Tensor) -> float:
    """pred: (k, P, H, 2) samples, true: (P, H, 2) -> mean over pedestrians of the best sample's mean L2 error."""
    return float(_forecast_errors(pred, true).mean(-1).min(0).values.mean())


def min_fde(pred: torch.Tensor, true: torch.Tensor) -> float:
    """pred: (k, P, H, 2) samples, true: (P, H, 2) -> mean over pedestrians of the best sample's final L2 error."""
    return float(_forecast_errors(pred, true)[..., -1].min(0).values.mean())


def simulation_metrics(
    sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor, *, threshold: float = 0.5
) -> dict[str, float]:
    """All simulation metrics at their default settings: {"mae", "ot", "mmd", "dtw", "fde", "collisions"};
    collisions are the events among the simulated positions under `mask`."""
    return {
        "mae": mae(sim, real, mask),
        "ot": ot_sinkhorn(sim, real, mask),
        "mmd": mmd(sim, real, mask),
        "dtw": dtw(sim, real, mask),
        "fde": fde(sim, real, mask),
        "collisions": collisions(sim, mask, threshold=threshold),
    }


# --- helpers -----------------------------------------------------------------------------------------------------


def _check_positions(x: torch.Tensor, name: str) -> None:
    check_tensor(x, name, finite=False)
    if x.dim() != 3 or x.shape[-1] != 2 or not x.is_floating_point():
        raise ValueError(f"{name}: expected a float tensor of shape (T, P, 2), got {x.dtype} {tuple(x.shape)}")


def _check_present_finite(x: torch.Tensor, mask: torch.Tensor, name: str) -> None:
    bad = mask & ~torch.isfinite(x).all(-1)
    if bool(bad.any()):
        t, p = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name}: NaN or inf at a present entry (frame {t}, pedestrian {p})")


def _check_tracks(sim: torch.Tensor, real: torch.Tensor, mask: torch.Tensor) -> None:
    """sim, real: (T, P, 2) of one shape, mask: (T, P) bool with a present entry, present entries finite."""
    _check_positions(sim, "sim")
    _check_positions(real, "real")
    if sim.shape != real.shape:
        raise ValueError(f"sim, real: shapes differ, {tuple(sim.shape)} vs {tuple(real.shape)}")
    _check_mask(mask, sim.shape[:2])
    if not bool(mask.any()):
        raise ValueError("mask: no pedestrian is present in any frame")
    _check_present_finite(sim, mask, "sim")
    _check_present_finite(real, mask, "real")


def _crowded_frames(mask: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
    """(frame, mask row) for the frames with at least `_MIN_CROWD` present pedestrians; ValueError if none."""
    frames = (mask.sum(1) >= _MIN_CROWD).nonzero().flatten().tolist()
    if not frames:
        raise ValueError(f"mask: no frame has at least {_MIN_CROWD} present pedestrians")
    return [(t, mask[t]) for t in frames]


def _frame_mmd(x: torch.Tensor, y: torch.Tensor, kernel_mul: float, kernel_num: int) -> torch.Tensor:
    """MMD^2 of one frame with the SPDiff bandwidths, via the core's exp(-d^2 / (2 h^2)) kernels (2 h^2 = width)."""
    pooled = torch.cat([x, y])
    n = pooled.shape[0]
    base = float(torch.cdist(pooled, pooled).square().sum()) / (n * n - n) / kernel_mul ** (kernel_num // 2)
    if base == 0:  # every point coincides: the two samples are the same point mass
        return x.new_zeros(())
    widths = [math.sqrt(base * kernel_mul**i / 2) for i in range(kernel_num)]
    return core_mmd(x, y, bandwidth=widths, unbiased=False)


def _compact(positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """positions (T, P, 2) -> (P, L, 2): each pedestrian's present points in order, left-aligned, zero-padded
    (L = the most frames any pedestrian is present)."""
    rank = mask.long().cumsum(0) - 1
    t, p = mask.nonzero(as_tuple=True)
    out = positions.new_zeros(mask.shape[1], int(mask.sum(0).max()), 2)
    out[p, rank[t, p]] = positions[t, p]
    return out


def _dtw_cost(x: torch.Tensor, y: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Cumulative DTW cost (P,) of x, y: (P, L, 2) over each row's first n (P,) points.

    D(i, j) = c(i, j) + min(D(i-1, j), D(i, j-1), D(i-1, j-1)), swept along the anti-diagonals k = i + j (a diagonal
    is stored by i). Pedestrians are sorted by length so that those still running on diagonal k (2 n - 2 >= k)
    form a prefix; each diagonal computes only its columns inside the table.
    """
    order = n.argsort(descending=True)
    x, y, n = x[order], y[order], n[order]
    P, L, _ = x.shape
    i = torch.arange(L, device=x.device)
    steps = torch.arange(2 * L, device=x.device)
    running = (2 * n - 2 >= steps.unsqueeze(1)).sum(1).tolist()  # running[k]: pedestrians still on diagonal k
    inf = x.new_full((P, 1), math.inf)
    before, last = x.new_full((P, L), math.inf), x.new_full((P, L), math.inf)  # diagonals k - 2 and k - 1
    cost = x.new_zeros(P)
    for k in range(2 * L - 1):
        a, lo, hi = running[k], max(0, k - L + 1), min(k, L - 1) + 1
        rows, cols = slice(0, a), i[lo:hi]
        local = (x[rows, lo:hi] - y[rows, k - cols]).norm(dim=-1)
        if k == 0:
            reach = torch.zeros_like(local)
        else:
            up = torch.cat([inf[rows], last[rows]], 1)[:, lo:hi]  # D(i-1, j): diagonal k-1 at i-1
            diagonal = torch.cat([inf[rows], before[rows]], 1)[:, lo:hi]  # D(i-1, j-1): diagonal k-2 at i-1
            reach = torch.minimum(torch.minimum(up, last[rows, lo:hi]), diagonal)
        inside = (cols < n[rows].unsqueeze(1)) & (k - cols < n[rows].unsqueeze(1))
        current = x.new_full((a, L), math.inf)
        current[:, lo:hi] = torch.where(inside, local + reach, math.inf)
        done = slice(running[k + 1], a)  # pedestrians whose last cell (n - 1, n - 1) lies on this diagonal
        cost[done] = current[done].gather(1, (n[done] - 1).unsqueeze(1)).squeeze(1)
        before, last = last[rows], current
    return cost.scatter(0, order, cost.clone())


def _forecast_errors(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """(k, P, H) L2 errors of pred (k, P, H, 2) against true (P, H, 2)."""
    check_tensor(pred, "pred", min_dim=4)
    check_tensor(true, "true", min_dim=3)
    if pred.dim() != 4 or true.dim() != 3 or pred.shape[1:] != true.shape or true.shape[-1] != 2:
        raise ValueError(
            f"pred, true: expected (k, P, H, 2) and (P, H, 2), got {tuple(pred.shape)} and {tuple(true.shape)}"
        )
    return (pred - true.unsqueeze(0)).norm(dim=-1)
