"""Per-step model inputs, all in each pedestrian's ego frame (forward = towards its destination), so the model's
inputs are invariant and its sampled accelerations equivariant under rotations and translations of the scene.

- history: the last H frames of (p - p_now, v, a), oldest first (6 features per frame);
- neighbours: other pedestrians within `ped_radius` inside the sight cone (half-angle around the walking direction;
  a standing pedestrian sees all around), the `ped_topk` nearest, found with the core's pure-torch `radius_graph`;
- edge features r_ij = (p_j - p_i, v_j - v_i) in i's frame, |p_j - p_i|, and the similarities
  sim1_ij = (dp_ij . v_j / (|dp_ij| |v_j|) + 1) / 2 with dp_ij = p_i - p_j (j walks straight at i -> 1),
  sim2_ij = (v_i . v_j / (|v_i| |v_j|) + 1) / 2 (parallel -> 1), and per node
  sim3_i = (w_i . g_i / (|w_i| |g_i|) + 1) / 2 with w_i = (v_i, a_i) and g_i the mean w_j of i's neighbours
  (a zero vector counts as orthogonal: similarity 1/2);
- environment tokens: the `env_topk` nearest annotated boxes (obstacles and objects of interest) within
  `env_radius` of the box outline, each with the direction (ego) and log1p distance of its closest outline point and
  of its centre, log1p side lengths, orientation (cos 2phi, sin 2phi of its first side against the ego axis), inside
  flag and, for objects of interest, whether the pedestrian is within `interest_radius`;
- lighting tokens: the `light_topk` brightest cells of the scene image's HSV value channel within `light_radius`
  inside the sight cone, each (relative position (ego), brightness).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np
import torch

from flowlab.core.config import Config
from flowlab.core.nets import radius, radius_graph
from flowlab.crowd_sim.geometry import closest_points_on_boxes, ego_frames, to_ego, unit

__all__ = [
    "EDGE_DIM",
    "ENV_DIM",
    "LIGHT_DIM",
    "NODE_DIM",
    "FeatureConfig",
    "SceneEnvironment",
    "StepInputs",
    "brightness_cells",
    "neighbours",
    "similarities",
    "step_inputs",
]

NODE_DIM = 8  # sim3, speed, log(1 + distance to destination), v (2), F_dest (2), standing flag
EDGE_DIM = 7  # dp (2), dv (2), |dp|, sim1, sim2
ENV_DIM = 13  # closest: direction (2), log distance; centre: direction (2), log distance; log sides (2);
#               cos/sin 2phi (2); inside; near interest; is interest
LIGHT_DIM = 3  # relative position (2), brightness


@dataclass(frozen=True)
class FeatureConfig(Config):
    """Neighbourhood sizes (SPDiff / EnvSocial-Diff defaults: 4 m, 6 neighbours, 90 degree half-angle)."""

    history: int = 8
    ped_radius: float = 4.0
    ped_topk: int = 6
    half_angle_deg: float = 90.0
    env_radius: float = 5.0
    env_topk: int = 10
    interest_radius: float = 1.2
    light_radius: float = 4.0
    light_topk: int = 20
    standing_speed: float = 0.1

    @classmethod
    def from_constants(cls, constants: dict, **overrides) -> FeatureConfig:
        """The official scene configuration's neighbourhoods (`Scene.constants`): e.g. obstacles within 4 m (UCY) or
        40 m (GC, whose annotated objects lie around the tracked crop)."""
        keys = {
            "ped_radius": "dist_threshold_ped",
            "ped_topk": "topk_ped",
            "half_angle_deg": "sight_angle_ped",
            "env_radius": "dist_threshold_obs",
            "env_topk": "topk_obs",
            "interest_radius": "interests_radius",
            "light_radius": "dist_threshold_brights",
            "light_topk": "topk_brights",
        }
        values = {k: type(getattr(cls(), k))(constants[c]) for k, c in keys.items() if c in constants}
        return cls(**{**values, **overrides})


@dataclass(frozen=True)
class SceneEnvironment:
    """The static scene as the features need it: boxes (M of them; kind 0 = obstacle, 1 = object of interest,
    `category` an index into the model's vocabulary) and brightness cells (C of them; none without an image)."""

    corners: torch.Tensor  # (M, 4, 2)
    centres: torch.Tensor  # (M, 2)
    kind: torch.Tensor  # (M,) long
    category: torch.Tensor  # (M,) long
    cells: torch.Tensor  # (C, 2)
    brightness: torch.Tensor  # (C,)

    def to(self, device: torch.device | str) -> SceneEnvironment:
        """A copy with every tensor moved to `device`."""
        return SceneEnvironment(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def transformed(self, rotation: torch.Tensor, shift: torch.Tensor) -> SceneEnvironment:
        """The scene moved rigidly, x -> rotation @ x + shift (rotation: (2, 2), shift: (2,))."""

        def move(x: torch.Tensor) -> torch.Tensor:
            return x @ rotation.T.to(x) + shift.to(x)

        return replace(self, corners=move(self.corners), centres=move(self.centres), cells=move(self.cells))


def brightness_cells(scene, cell_px: int, *, max_range: float = 1000.0):
    """HSV value channel (max of R, G, B, in [0, 1]) of `scene.image`, mean-pooled on cells of `cell_px` pixels.

    Returns (centres (C, 2) in metres, brightness (C,)); cells that the homography sends beyond `max_range` metres
    (at or above the horizon line of the ground plane) are dropped. Empty without an image.
    """
    if scene.image is None:
        return torch.zeros(0, 2), torch.zeros(0)
    value = np.asarray(scene.image, dtype=np.float32).max(axis=-1) / 255.0  # (H, W)
    h, w = value.shape
    rows, cols = h // cell_px, w // cell_px
    pooled = value[: rows * cell_px, : cols * cell_px].reshape(rows, cell_px, cols, cell_px).mean(axis=(1, 3))
    v, u = np.meshgrid((np.arange(rows) + 0.5) * cell_px, (np.arange(cols) + 0.5) * cell_px, indexing="ij")
    uv = torch.tensor(np.stack([u.ravel(), v.ravel()], axis=1), dtype=torch.float64)
    centres = scene.pixel_to_metres(uv).float()
    bright = torch.tensor(pooled.ravel(), dtype=torch.float32)
    keep = torch.isfinite(centres).all(-1) & (centres.abs() < max_range).all(-1)
    return centres[keep], bright[keep]


@dataclass(frozen=True)
class StepInputs:
    """Model inputs of N pedestrians (one or many graphs), everything in ego frames except `rotations`."""

    rotations: torch.Tensor  # (N, 2, 2) world -> ego
    history: torch.Tensor  # (N, H, 6)
    node: torch.Tensor  # (N, NODE_DIM)
    positions: torch.Tensor  # (N, 2) world (only differences and distances reach the network)
    edge_index: torch.Tensor  # (2, E), j -> i
    edge_attr: torch.Tensor  # (E, EDGE_DIM)
    env: torch.Tensor  # (N, K, ENV_DIM)
    env_category: torch.Tensor  # (N, K) long
    env_mask: torch.Tensor  # (N, K) bool
    light: torch.Tensor  # (N, L, LIGHT_DIM)
    light_mask: torch.Tensor  # (N, L) bool

    @property
    def num_nodes(self) -> int:
        """The number of pedestrians N (nodes) in the inputs."""
        return self.rotations.shape[0]

    def to(self, device: torch.device | str) -> StepInputs:
        """A copy with every tensor moved to `device`."""
        return StepInputs(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    @staticmethod
    def cat(parts: list[StepInputs]) -> StepInputs:
        """Concatenate disjoint graphs (edge indices offset; token lists padded to the longest)."""
        offsets = np.cumsum([0] + [p.num_nodes for p in parts[:-1]])
        k = max(p.env.shape[1] for p in parts)
        ell = max(p.light.shape[1] for p in parts)

        def pad(x: torch.Tensor, n: int) -> torch.Tensor:
            extra = n - x.shape[1]
            if extra == 0:
                return x
            return torch.cat([x, x.new_zeros(x.shape[0], extra, *x.shape[2:])], dim=1)

        return StepInputs(
            rotations=torch.cat([p.rotations for p in parts]),
            history=torch.cat([p.history for p in parts]),
            node=torch.cat([p.node for p in parts]),
            positions=torch.cat([p.positions for p in parts]),
            edge_index=torch.cat([p.edge_index + int(o) for p, o in zip(parts, offsets, strict=True)], dim=1),
            edge_attr=torch.cat([p.edge_attr for p in parts]),
            env=torch.cat([pad(p.env, k) for p in parts]),
            env_category=torch.cat([pad(p.env_category, k) for p in parts]),
            env_mask=torch.cat([pad(p.env_mask, k) for p in parts]),
            light=torch.cat([pad(p.light, ell) for p in parts]),
            light_mask=torch.cat([pad(p.light_mask, ell) for p in parts]),
        )


def _sees(velocity: torch.Tensor, offset: torch.Tensor, cfg: FeatureConfig) -> torch.Tensor:
    """Whether offsets (..., 2) from a pedestrian with `velocity` (broadcastable) lie in its sight cone."""
    cos_limit = math.cos(math.radians(cfg.half_angle_deg))
    standing = velocity.norm(dim=-1) < cfg.standing_speed
    cos = (unit(velocity) * unit(offset)).sum(-1)
    return standing | (cos >= cos_limit - 1e-6)


def _rank_within(groups: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Rank (0 = smallest key) of each entry within its group. groups, keys: (E,) -> (E,) long."""
    order = torch.argsort(keys, stable=True)
    order = order[torch.argsort(groups[order], stable=True)]
    sorted_groups = groups[order]
    start = torch.searchsorted(sorted_groups, sorted_groups, right=False)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device) - start
    return rank


def neighbours(
    positions: torch.Tensor, velocities: torch.Tensor, batch: torch.Tensor, cfg: FeatureConfig
) -> torch.Tensor:
    """Visible neighbours: edges j -> i within `ped_radius`, in i's sight cone, the `ped_topk` nearest.

    positions, velocities: (N, 2); batch: (N,) graph ids -> edge_index: (2, E) sorted by target, then distance.
    """
    edges = radius_graph(positions, cfg.ped_radius, batch=batch)
    src, dst = edges
    offset = positions[src] - positions[dst]
    edges = edges[:, _sees(velocities[dst], offset, cfg)]
    src, dst = edges
    dist = (positions[src] - positions[dst]).norm(dim=-1)
    keep = _rank_within(dst, dist) < cfg.ped_topk
    edges, dist = edges[:, keep], dist[keep]
    order = torch.argsort(dist, stable=True)
    order = order[torch.argsort(edges[1, order], stable=True)]
    return edges[:, order]


def similarities(
    positions: torch.Tensor, velocities: torch.Tensor, accelerations: torch.Tensor, edge_index: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """sim1 (E,), sim2 (E,), sim3 (N,), all in [0, 1] (see the module docstring)."""
    src, dst = edge_index
    sim1 = 0.5 * ((unit(positions[dst] - positions[src]) * unit(velocities[src])).sum(-1) + 1)
    sim2 = 0.5 * ((unit(velocities[dst]) * unit(velocities[src])).sum(-1) + 1)
    w = torch.cat([velocities, accelerations], dim=-1)
    total = w.new_zeros(w.shape).index_add_(0, dst, w[src])
    count = torch.bincount(dst, minlength=w.shape[0]).clamp_min(1).to(w.dtype)
    g = total / count[:, None]
    sim3 = 0.5 * ((unit(w) * unit(g)).sum(-1) + 1)
    return sim1, sim2, sim3


def _select(score: torch.Tensor, valid: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices (N, k') of the k smallest valid scores per row and their validity mask (N, k')."""
    k = min(k, score.shape[1])
    if k == 0:
        return score.new_zeros(score.shape[0], 0, dtype=torch.long), valid[:, :0]
    masked = torch.where(valid, score, torch.full_like(score, math.inf))
    values, index = masked.topk(k, dim=1, largest=False)
    return index, torch.isfinite(values)


def _environment(p, R, env: SceneEnvironment, cfg: FeatureConfig):
    n, m = p.shape[0], env.corners.shape[0]
    if m == 0:
        return p.new_zeros(n, 0, ENV_DIM), torch.zeros(n, 0, dtype=torch.long), torch.zeros(n, 0, dtype=torch.bool)
    closest, inside = closest_points_on_boxes(p, env.corners)  # (N, M, 2), (N, M)
    rel = closest - p[:, None]
    dist = torch.where(inside, torch.zeros_like(rel[..., 0]), rel.norm(dim=-1))
    index, mask = _select(dist, dist <= cfg.env_radius, cfg.env_topk)
    sides = torch.stack(
        [(env.corners[:, 1] - env.corners[:, 0]).norm(dim=-1), (env.corners[:, 2] - env.corners[:, 1]).norm(dim=-1)],
        dim=-1,
    )  # (M, 2)
    direction = unit(env.corners[:, 1] - env.corners[:, 0])  # (M, 2)
    ego_dir = to_ego(direction[None].expand(n, -1, -1), R)  # (N, M, 2)
    double = torch.stack([ego_dir[..., 0] ** 2 - ego_dir[..., 1] ** 2, 2 * ego_dir[..., 0] * ego_dir[..., 1]], -1)
    interest = (env.kind == 1).to(p.dtype)[None].expand(n, -1)
    to_centre = env.centres[None] - p[:, None]
    tokens = torch.cat(
        [  # bounded inputs: unit directions and log1p distances (GC's boxes lie up to 40 m away)
            to_ego(unit(rel), R),
            torch.log1p(dist)[..., None],
            to_ego(unit(to_centre), R),
            torch.log1p(to_centre.norm(dim=-1))[..., None],
            torch.log1p(sides)[None].expand(n, -1, -1),
            double,
            inside[..., None].to(p.dtype),
            ((dist <= cfg.interest_radius).to(p.dtype) * interest)[..., None],
            interest[..., None],
        ],
        dim=-1,
    )  # (N, M, ENV_DIM)
    tokens = torch.gather(tokens, 1, index[..., None].expand(-1, -1, ENV_DIM))
    category = torch.gather(env.category[None].expand(n, -1), 1, index)
    return tokens * mask[..., None], category * mask, mask


def _lighting(p, v, R, env: SceneEnvironment, cfg: FeatureConfig):
    """The `light_topk` brightest cells within `light_radius` in each pedestrian's sight cone: tokens (N, L,
    LIGHT_DIM) and mask (N, L), brightest first. The cells in range come from the core's `radius` (a cell list),
    so the cost grows with the cells near the pedestrians, not with all cells of the image."""
    n = p.shape[0]
    if env.cells.shape[0] == 0:
        return p.new_zeros(n, 0, LIGHT_DIM), torch.zeros(n, 0, dtype=torch.bool)
    i, c = radius(env.cells, p, cfg.light_radius)
    rel = env.cells[c] - p[i]
    seen = _sees(v[i], rel, cfg)
    i, c, rel = i[seen], c[seen], rel[seen]
    rank = _rank_within(i, -env.brightness[c])
    keep = rank < cfg.light_topk
    i, slot, rel, c = i[keep], rank[keep], rel[keep], c[keep]
    k = min(cfg.light_topk, env.cells.shape[0])
    tokens = p.new_zeros(n, k, LIGHT_DIM)
    tokens[i, slot] = torch.cat([to_ego(rel, R[i]), env.brightness[c][:, None]], dim=-1)
    mask = torch.zeros(n, k, dtype=torch.bool, device=p.device)
    mask[i, slot] = True
    return tokens, mask


def step_inputs(
    positions: torch.Tensor,
    velocities: torch.Tensor,
    accelerations: torch.Tensor,
    history: torch.Tensor,
    destinations: torch.Tensor,
    batch: torch.Tensor,
    env: SceneEnvironment,
    cfg: FeatureConfig,
    destination_force,
) -> StepInputs:
    """Inputs for N pedestrians: positions, velocities, accelerations, destinations: (N, 2); history: (N, H, 6)
    absolute (p, v, a), oldest first; batch: (N,) graph ids (pedestrians of different graphs never interact)."""
    p, v, a = positions, velocities, accelerations
    R = ego_frames(destinations - p, fallback=v)
    hist = history.clone()
    hist[..., 0:2] = hist[..., 0:2] - p[:, None]
    hist = torch.cat([to_ego(hist[..., 0:2], R), to_ego(hist[..., 2:4], R), to_ego(hist[..., 4:6], R)], dim=-1)
    edge_index = neighbours(p, v, batch, cfg)
    src, dst = edge_index
    sim1, sim2, sim3 = similarities(p, v, a, edge_index)
    dp = to_ego(p[src] - p[dst], R[dst])
    dv = to_ego(v[src] - v[dst], R[dst])
    edge_attr = torch.cat([dp, dv, dp.norm(dim=-1, keepdim=True), sim1[:, None], sim2[:, None]], dim=-1)
    speed = v.norm(dim=-1, keepdim=True)
    node = torch.cat(
        [
            sim3[:, None],
            speed,
            torch.log1p((destinations - p).norm(dim=-1, keepdim=True)),
            to_ego(v, R),
            to_ego(destination_force(p, v, destinations), R),
            (speed < cfg.standing_speed).to(p.dtype),
        ],
        dim=-1,
    )
    env_tokens, env_category, env_mask = _environment(p, R, env, cfg)
    light, light_mask = _lighting(p, v, R, env, cfg)
    return StepInputs(
        rotations=R,
        history=hist,
        node=node,
        positions=p,
        edge_index=edge_index,
        edge_attr=edge_attr,
        env=env_tokens,
        env_category=env_category,
        env_mask=env_mask,
        light=light,
        light_mask=light_mask,
    )
