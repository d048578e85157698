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
    frame_step: int = 5,
    known_destinations: bool = True,
    lookahead: float = 8.0,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """{"min_ade", "min_fde"} over k samples, and "pred_pedestrians" scored, for a recorded window.

    Positions are sampled every `frame_step` frames (5 x 0.08 s = 0.4 s, the 2.5 Hz of the trajectory-forecasting
    literature: observe 3.2 s, predict 4.8 s).

    At start frames s (every `stride` frames) each pedestrian present throughout the observed and predicted samples
    is scored; the simulator runs at the window's own rate from the recorded states at s, all pedestrians present
    at s together."""
    preds, truths = [], []
    first = (observe - 1) * frame_step
    steps = horizon * frame_step
    for s in range(first, window.num_frames - steps, stride):
        span = window.mask[s - first : s + steps + 1].all(0)
        if not bool(span.any()):
            continue
        present = (window.first_frame <= s) & (window.last_frame >= s)
        init = InitialStates.from_window(window, start=s, history=observe)
        exit_ = torch.where(present, window.last_frame, init.entry - 1)
        init = InitialStates(init.positions, init.velocities, init.history, init.entry, exit_)
        dest = window.destinations if known_destinations else init.positions + lookahead * init.velocities
        traj = simulate(scene, init, dest, steps, model=model, start=s, replicas=k, generator=generator, device=device)
        preds.append(traj.positions[:, frame_step::frame_step, span].permute(0, 2, 1, 3).cpu())
        truths.append(window.positions[s + frame_step : s + steps + 1 : frame_step, span].permute(1, 0, 2))
    if not preds:
        need = first + steps + 1
        raise ValueError(f"window {window.name}: no pedestrian is present for {need} consecutive frames")
    pred, true = torch.cat(preds, dim=1), torch.cat(truths)
    return {"min_ade": min_ade(pred, true), "min_fde": min_fde(pred, true), "pred_pedestrians": float(len(true))}
