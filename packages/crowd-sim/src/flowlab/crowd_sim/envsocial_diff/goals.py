"""Where each pedestrian walks: the goal model, one definition for training and for forecasting.

- "recorded": each track's recorded last point (the simulation protocol of SPDiff / EnvSocial-Diff, and forecasting
  with known destinations).
- "constant_velocity": the point that constant velocity reaches `lookahead` seconds after the last observed frame
  (forecasting, where the destination is unknown). In teacher forcing, frame t of a track that entered at frame f is
  treated as frame t - a of a forecast observed up to the anchor a = max(f, t - t mod `every`), so the model is
  trained on the goals it will be given: a goal fixed at the last observation and held for up to `every` frames.
"""

from __future__ import annotations

import torch

from flowlab.crowd_sim.envsocial_diff.names import GOALS

__all__ = ["GOALS", "anchored_goals", "constant_velocity_goals"]


def constant_velocity_goals(positions: torch.Tensor, velocities: torch.Tensor, lookahead: float) -> torch.Tensor:
    """positions, velocities: (..., 2) at the last observed frame -> goals (..., 2), `lookahead` seconds ahead."""
    return positions + lookahead * velocities


def anchored_goals(kinematics, first: torch.Tensor, frame: int, every: int, lookahead: float) -> torch.Tensor:
    """Constant-velocity goals of every pedestrian at recorded frame `frame`, anchored as the module docstring says.

    kinematics: `recorded_kinematics(window)` (positions and velocities (T, P, 2), ...); first: (P,) long, each
    track's first frame -> (P, 2).
    """
    p, v, _ = kinematics
    anchor = torch.clamp(first, max=p.shape[0] - 1).clamp_min(frame - frame % every)
    ped = torch.arange(p.shape[1])
    return constant_velocity_goals(p[anchor, ped], v[anchor, ped], lookahead)
