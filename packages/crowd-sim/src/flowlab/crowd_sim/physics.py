"""The physics outside the diffusion model, and the two physics baselines.

- Destination force (SPDiff's physics part): F_dest = (v_des n - v) / tau with n the unit vector to the destination.
  `calibrate_destination_force` fits v_des and tau by least squares on recorded accelerations (a ~ (v_des / tau) n -
  v / tau is linear in (v_des / tau, 1 / tau)); SPDiff initialises them at 1.3 m/s and 0.5 s.
- Integration, consistent with the data's forward differences (v_t = (p_{t+1} - p_t) / dt, a_t = (v_{t+1} - v_t) / dt):
  p <- p + dt v, then v <- clip(v + dt a, max_speed). Replaying recorded accelerations reproduces the recording.
- Social force model (Helbing & Molnar 1995): destination force + sum_j A exp((r - d_ij) / B) n_ij over the other
  pedestrians within `cutoff` + A_obs exp(-d_io / B_obs) n_io from each annotated box (d_io: distance to its outline,
  n_io: unit vector away from it). `calibrate_social_force` grid-searches (A, B) on a training window.
- Constant velocity: zero acceleration.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from flowlab.core.nets import radius_graph
from flowlab.crowd_sim.geometry import closest_points_on_boxes, unit

__all__ = [
    "DestinationForce",
    "SocialForceParams",
    "calibrate_destination_force",
    "integrate",
    "social_force",
]


@dataclass(frozen=True)
class DestinationForce:
    """F_dest = (v_des n - v) / tau; v_des in m/s, tau in s."""

    v_des: float = 1.3
    tau: float = 0.5

    def __post_init__(self) -> None:
        if not (self.v_des > 0 and self.tau > 0):
            raise ValueError(f"DestinationForce: expected v_des > 0 and tau > 0, got {self.v_des}, {self.tau}")

    def __call__(self, positions: torch.Tensor, velocities: torch.Tensor, destinations: torch.Tensor) -> torch.Tensor:
        """positions, velocities: (..., 2); destinations: broadcastable (..., 2) -> force (..., 2)."""
        n = unit(destinations - positions)
        return (self.v_des * n - velocities) / self.tau


def integrate(
    positions: torch.Tensor,
    velocities: torch.Tensor,
    accelerations: torch.Tensor,
    dt: float,
    max_speed: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step: p <- p + dt v; v <- v + dt a with the speed clipped at `max_speed` (a number, or per pedestrian
    (..., 1) broadcastable). All others (..., 2)."""
    positions = positions + dt * velocities
    v = velocities + dt * accelerations
    speed = v.norm(dim=-1, keepdim=True)
    v = torch.where(speed > max_speed, v * (max_speed / speed.clamp_min(1e-12)), v)
    return positions, v


def calibrate_destination_force(
    positions: torch.Tensor, velocities: torch.Tensor, accelerations: torch.Tensor, destinations: torch.Tensor
) -> DestinationForce:
    """Least-squares v_des, tau from recorded samples: positions, velocities, accelerations, destinations (N, 2).

    Solves a = c1 n - c2 v for (c1, c2) = (v_des / tau, 1 / tau); raises if the fit is not physical (c1, c2 <= 0).
    """
    n = unit(destinations - positions).double()
    v, a = velocities.double(), accelerations.double()
    # normal equations of min |c1 n - c2 v - a|^2 over both coordinates
    A = torch.stack([n.reshape(-1), -v.reshape(-1)], dim=1)
    c = torch.linalg.lstsq(A, a.reshape(-1, 1)).solution.flatten()
    c1, c2 = float(c[0]), float(c[1])
    if not (c1 > 0 and c2 > 0):
        raise ValueError(f"calibrate_destination_force: non-physical fit v_des/tau={c1:.3g}, 1/tau={c2:.3g}")
    return DestinationForce(v_des=c1 / c2, tau=1 / c2)


@dataclass(frozen=True)
class SocialForceParams:
    """Helbing-Molnar constants: pedestrian repulsion A (m/s^2), B (m), r (sum of radii, m); obstacle repulsion
    A_obs, B_obs; interactions beyond `cutoff` metres are ignored."""

    A: float = 2.1
    B: float = 0.3
    r: float = 0.6
    A_obs: float = 10.0
    B_obs: float = 0.2
    cutoff: float = 5.0


def social_force(
    positions: torch.Tensor,
    velocities: torch.Tensor,
    destinations: torch.Tensor,
    alive: torch.Tensor,
    boxes: torch.Tensor,
    *,
    destination_force: DestinationForce,
    params: SocialForceParams,
    groups: torch.Tensor | None = None,
) -> torch.Tensor:
    """Social-force accelerations of every pedestrian, batched over replicas.

    positions, velocities: (R, P, 2); destinations: (P, 2); alive: (P,) bool; boxes: (M, 4, 2) obstacle corners;
    groups: (P,) long, pedestrians of different groups never interact (None: one group) -> (R, P, 2) (0 for
    pedestrians that are not alive). Pairs within `cutoff` come from the core's `radius_graph` (linear in P).
    """
    force = destination_force(positions, velocities, destinations)
    R, P = positions.shape[:2]
    live = alive.nonzero().squeeze(1)
    group = torch.zeros_like(alive, dtype=torch.long) if groups is None else groups.to(alive.device).long()
    graph = (torch.arange(R, device=alive.device)[:, None] * (int(group.max()) + 1 if P else 1) + group[live]).flatten()
    flat = positions[:, live].reshape(-1, 2)
    src, dst = radius_graph(flat, params.cutoff, batch=graph)
    diff = flat[dst] - flat[src]  # p_i - p_j
    dist = diff.norm(dim=-1)
    near = dist < params.cutoff
    mag = params.A * torch.exp((params.r - dist[near]) / params.B)
    pushed = flat.new_zeros(flat.shape).index_add_(0, dst[near], mag[:, None] * unit(diff[near]))
    force = force.clone()
    force[:, live] = force[:, live] + pushed.reshape(R, -1, 2)
    if boxes.shape[0]:
        flat = positions.reshape(-1, 2)
        closest, inside = closest_points_on_boxes(flat, boxes)  # (R*P, M, 2)
        away = flat[:, None, :] - closest
        d = away.norm(dim=-1)
        direction = torch.where(inside[..., None], -unit(away), unit(away))
        d = torch.where(inside, torch.zeros_like(d), d)
        mag = torch.where(d < params.cutoff, params.A_obs * torch.exp(-d / params.B_obs), torch.zeros_like(d))
        force = force + (mag[..., None] * direction).sum(1).reshape(positions.shape)
    return torch.where(alive[None, :, None], force, torch.zeros_like(force))


def sweep_grid(params: SocialForceParams, A: Sequence[float], B: Sequence[float]) -> list[SocialForceParams]:
    """The (A, B) grid of `calibrate_social_force`, other constants from `params`."""
    return [replace(params, A=a, B=b) for a, b in itertools.product(A, B)]
