"""Prediction mode: observe 8 frames, sample k futures of 12 frames for every pedestrian, jointly (all pedestrians of
a scene move together in each sample; the k samples are batched replicas).

Destinations: the simulation protocol gives each pedestrian its recorded exit point; in forecasting it is unknown, so
`predict` without destinations uses the policy's goal model (`goals`): where constant velocity would take each
pedestrian in `lookahead` seconds, the goals a model trained with goal "constant_velocity" saw in training.
`predict_window` forecasts the pedestrians of a recorded window observed up to a start frame, as a rollout of the
window (`flowlab crowd predict`).
"""

from __future__ import annotations

import torch

from flowlab.crowd_sim.envsocial_diff.goals import constant_velocity_goals
from flowlab.crowd_sim.metrics import min_ade, min_fde
from flowlab.crowd_sim.simulate import InitialStates, Policy, Trajectories, simulate

__all__ = ["evaluate_prediction", "forecast_goals", "predict", "predict_window"]


def predict(
    scene,
    history: torch.Tensor,
    k: int,
    *,
    model: Policy,
    destinations: torch.Tensor | None = None,
    groups: torch.Tensor | None = None,
    horizon: int = 12,
    lookahead: float | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """k sampled futures of every pedestrian: history (P, H, 2) observed positions (H >= 2, oldest first, frames
    `scene.time_unit` apart) -> (k, P, horizon, 2).

    groups: (P,) long, many windows in one call as one block-diagonal graph (pedestrians of different groups never
    interact; None: one group). destinations: (P, 2), or None for the policy's goal model (`goals`): constant-velocity
    goals `lookahead` s ahead (default the policy's `goal_lookahead`, else 8 s); a model trained towards recorded
    destinations needs them given."""
    traj = _forecast(scene, history, k, model, destinations, groups, horizon, lookahead, generator, device)
    return traj.positions[:, 1:].permute(0, 2, 1, 3)


def forecast_goals(model: Policy, positions: torch.Tensor, velocities: torch.Tensor, lookahead: float | None):
    """Goals (P, 2) for pedestrians observed at positions, velocities (P, 2) when their destinations are unknown: the
    policy's goal model (constant velocity `lookahead` s ahead). ValueError for a model trained towards recorded
    destinations, or a lookahead other than the one it was trained with."""
    if getattr(model, "goal", "constant_velocity") == "recorded":
        raise ValueError(
            "destinations: this model was trained towards recorded destinations (goal 'recorded'), so forecasting "
            "without them would use goals it never saw; give the destinations, or train with goal "
            "'constant_velocity' (`flowlab crowd train --goal constant_velocity`)"
        )
    trained = getattr(model, "goal_lookahead", None)
    if lookahead is not None and trained is not None and lookahead != trained:
        raise ValueError(f"lookahead: the model was trained with constant-velocity goals {trained} s ahead, got "
                         f"{lookahead}; leave it unset to use the model's")  # fmt: skip
    seconds = lookahead if lookahead is not None else trained if trained is not None else 8.0
    return constant_velocity_goals(positions, velocities, seconds)


def predict_window(
    scene,
    window,
    model: Policy,
    k: int,
    *,
    start: int | None = None,
    observe: int = 8,
    horizon: int = 12,
    known_destinations: bool = False,
    lookahead: float | None = None,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
) -> Trajectories:
    """`predict` on a recorded window, as a rollout over its frames start..start+horizon: the pedestrians present at
    every one of the `observe` frames up to `start` (default observe - 1, the first frame with a full observation)
    get k sampled futures of `horizon` frames.

    -> positions (k, horizon + 1, P, 2) over the window's P pedestrians (frame 0: the last observed positions; 0 for
    those not predicted), mask (horizon + 1, P) (the predicted pedestrians). Destinations: the recorded exits with
    `known_destinations`, else the policy's goal model (`forecast_goals`)."""
    start = observe - 1 if start is None else start
    observed = _observed(window, start, observe, horizon)
    history = window.positions[start - observe + 1 : start + 1, observed].transpose(0, 1)
    goals = window.destinations[observed] if known_destinations else None
    traj = _forecast(scene, history, k, model, goals, None, horizon, lookahead, generator, device)
    keep = observed.to(traj.positions.device)
    positions = traj.positions.new_zeros(k, horizon + 1, window.num_pedestrians, 2)
    positions[:, :, keep] = traj.positions
    mask = traj.mask.new_zeros(horizon + 1, window.num_pedestrians)
    mask[:, keep] = traj.mask
    return Trajectories(positions, mask, traj.collisions, start, traj.seconds, traj.nfe_per_step)


def _observed(window, start: int, observe: int, horizon: int) -> torch.Tensor:
    """(P,) bool: the pedestrians of `window` present at every frame start-observe+1..start, checked to be some, with
    the predicted frames start+1..start+horizon inside the window."""
    for name, value, least in (("observe", observe, 2), ("horizon", horizon, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name}: expected an integer >= {least} (frames), got {value!r}")
    if observe + horizon > window.num_frames:
        raise ValueError(f"observe, horizon: {observe} + {horizon} frames do not fit window {window.name} of "
                         f"{window.num_frames} frames")  # fmt: skip
    last = window.num_frames - 1 - horizon
    if isinstance(start, bool) or not isinstance(start, int) or not observe - 1 <= start <= last:
        raise ValueError(f"start: expected a frame in {observe - 1}..{last} (observe {observe} frames up to it, "
                         f"predict {horizon} after it in window {window.name}), got {start!r}")  # fmt: skip
    observed = window.mask[start - observe + 1 : start + 1].all(0)
    if not bool(observed.any()):
        raise ValueError(f"start: no pedestrian of window {window.name} is present at every frame "
                         f"{start - observe + 1}..{start}")  # fmt: skip
    return observed


def _forecast(scene, history, k, model, destinations, groups, horizon, lookahead, generator, device) -> Trajectories:
    """The rollout behind `predict` (its arguments, checked): positions (k, horizon + 1, P, 2) of the P pedestrians of
    history (P, H, 2), frame 0 their last observed positions."""
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
        destinations = forecast_goals(model, p[:, -1], v[:, -1], lookahead)
    init = InitialStates(p[:, -1], v[:, -1], hist, torch.zeros(P, dtype=torch.long), torch.full((P,), horizon))
    return simulate(scene, init, destinations, horizon, model=model, replicas=k, generator=generator, device=device,
                    groups=groups, keep_entry_speed=True)  # fmt: skip


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
    lookahead: float | None = None,
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
        dest = (
            window.destinations
            if known_destinations
            else forecast_goals(model, init.positions, init.velocities, lookahead)
        )
        traj = simulate(scene, init, dest, steps, model=model, start=s, replicas=k, generator=generator, device=device)
        preds.append(traj.positions[:, frame_step::frame_step, span].permute(0, 2, 1, 3).cpu())
        truths.append(window.positions[s + frame_step : s + steps + 1 : frame_step, span].permute(1, 0, 2))
    if not preds:
        need = first + steps + 1
        raise ValueError(f"window {window.name}: no pedestrian is present for {need} consecutive frames")
    pred, true = torch.cat(preds, dim=1), torch.cat(truths)
    return {"min_ade": min_ade(pred, true), "min_fde": min_fde(pred, true), "pred_pedestrians": float(len(true))}
