"""Prediction mode: observe 8 frames, sample k futures of 12 frames for every pedestrian, jointly (all pedestrians of
a scene move together in each sample; the k samples are batched replicas).

Destinations: the simulation protocol gives each pedestrian its recorded exit point; in forecasting it is unknown, so
`predict` without destinations aims each pedestrian at where constant velocity would take it in `lookahead` seconds.
"""

from __future__ import annotations

import torch

from flowlab.crowd_sim.metrics import min_ade, min_fde
from flowlab.crowd_sim.simulate import InitialStates, Policy, simulate

__all__ = ["evaluate_prediction", "predict"]


def predict(
    scene,
    history: torch.Tensor,
    k: int,
    *,
    model: Policy,
    destinations: torch.Tensor | None = None,
    horizon: int = 12,
    lookahead: float = 8.0,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """k sampled futures of every pedestrian: history (P, H, 2) observed positions (H >= 2, oldest first, frames
    `scene.time_unit` apart) -> (k, P, horizon, 2). destinations: (P, 2) or None (constant-velocity goals)."""
    if history.dim() != 3 or history.shape[-1] != 2 or history.shape[1] < 2:
        raise ValueError(f"history: expected shape (P, H >= 2, 2), got {tuple(history.shape)}")
    if not bool(torch.isfinite(history).all()):
        raise ValueError("history: contains NaN or inf positions")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected a positive number of samples, got {k!r}")
    dt = scene.time_unit
    p = history.float()
    v = torch.cat([(p[:, 1:] - p[:, :-1]) / dt, ((p[:, -1] - p[:, -2]) / dt)[:, None]], dim=1)
    a_prev = torch.cat([torch.zeros_like(v[:, :1]), (v[:, 1:] - v[:, :-1]) / dt], dim=1)
    a_prev[:, -1] = a_prev[:, -2]  # the last velocity repeats the previous one: carry its acceleration
    hist = torch.cat([p, v, a_prev], dim=-1)
    P = p.shape[0]
    if destinations is None:
        destinations = p[:, -1] + lookahead * v[:, -1]
    init = InitialStates(p[:, -1], v[:, -1], hist, torch.zeros(P, dtype=torch.long), torch.full((P,), horizon))
    traj = simulate(scene, init, destinations, horizon, model=model, replicas=k, generator=generator, device=device)
    return traj.positions[:, 1:].permute(0, 2, 1, 3)


def evaluate_prediction(
    scene,
    window,
    model: Policy,
    *,
    k: int = 20,
    observe: int = 8,
    horizon: int = 12,
    stride: int = 20,
    known_destinations: bool = True,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """minADE_k / minFDE_k over a recorded window: at start frames observe-1, observe-1+stride, ... every pedestrian
    present from observe frames before to `horizon` frames after is scored; all pedestrians present at the start
    frame are simulated together (from their recorded history)."""
    preds, truths = [], []
    for s in range(observe - 1, window.num_frames - horizon, stride):
        span = window.mask[s - observe + 1 : s + horizon + 1].all(0)
        if not bool(span.any()):
            continue
        present = (window.first_frame <= s) & (window.last_frame >= s)
        init = InitialStates.from_window(window, start=s, history=observe)
        exit_ = torch.where(present, window.last_frame, init.entry - 1)
        init = InitialStates(init.positions, init.velocities, init.history, init.entry, exit_)
        if known_destinations:
            dest = window.destinations
        else:
            dest = init.positions + 8.0 * init.velocities
        traj = simulate(
            scene, init, dest, horizon, model=model, start=s, replicas=k, generator=generator, device=device
        )
        preds.append(traj.positions[:, 1:, span].permute(0, 2, 1, 3).cpu())
        truths.append(window.positions[s + 1 : s + horizon + 1, span].permute(1, 0, 2))
    if not preds:
        raise ValueError(f"window {window.name}: no pedestrian is present for {observe + horizon} consecutive frames")
    pred, true = torch.cat(preds, dim=1), torch.cat(truths)
    return {
        f"min_ade{k}": min_ade(pred, true),
        f"min_fde{k}": min_fde(pred, true),
        "pred_pedestrians": float(len(true)),
    }
