"""The physics baselines as simulation policies: constant velocity and the social force model, with SFM's (A, B)
calibrated by a grid sweep on a training window (MAE of a short rollout)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from flowlab.crowd_sim.metrics import mae
from flowlab.crowd_sim.physics import DestinationForce, SocialForceParams, social_force, sweep_grid
from flowlab.crowd_sim.simulate import StepState, simulate_window

__all__ = ["SocialForcePolicy", "calibrate_social_force", "constant_velocity"]


def constant_velocity(state: StepState) -> torch.Tensor:
    """Zero acceleration: every pedestrian keeps its entry velocity."""
    return torch.zeros_like(state.positions)


@dataclass
class SocialForcePolicy:
    """Helbing-Molnar social forces with the scene's annotated obstacle boxes."""

    scene: object
    params: SocialForceParams
    destination_force: DestinationForce

    def __post_init__(self) -> None:
        self.boxes = self.scene.obstacles.corners.float()

    def __call__(self, state: StepState) -> torch.Tensor:
        """The social-force accelerations of the pedestrians of `state` with the scene's obstacle boxes, shaped like
        `state.positions`."""
        return social_force(
            state.positions,
            state.velocities,
            state.destinations,
            state.alive,
            self.boxes.to(state.positions.device),
            destination_force=self.destination_force,
            params=self.params,
            groups=state.groups,
        )


def calibrate_social_force(
    scene,
    window,
    destination_force: DestinationForce,
    *,
    A: Sequence[float] = (0.5, 1.0, 2.1, 4.0),
    B: Sequence[float] = (0.1, 0.2, 0.3, 0.5),
    frames: int = 250,
    base: SocialForceParams | None = None,
) -> tuple[SocialForceParams, dict[tuple[float, float], float]]:
    """The (A, B) of the lowest MAE over the first `frames` frames of `window`; returns it and every grid MAE."""
    scores = {}
    for params in sweep_grid(base or SocialForceParams(), A, B):
        traj = simulate_window(scene, window, SocialForcePolicy(scene, params, destination_force), steps=frames)
        real = window.positions[: traj.positions.shape[1]]
        scores[(params.A, params.B)] = mae(traj.positions[0], real, traj.mask)
    best = min(scores, key=scores.get)
    return replace(base or SocialForceParams(), A=best[0], B=best[1]), scores
