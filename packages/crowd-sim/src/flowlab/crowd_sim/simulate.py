"""Whole-scene rollout: every pedestrian advanced together, one batched policy call per frame (the only Python loop is
over time), `R` independent replicas batched as separate graphs.

Protocol (SPDiff / EnvSocial-Diff): a pedestrian enters at its entry frame with its recorded state (position and
forward-difference velocity) and its recorded history, walks towards its destination and leaves after its exit frame.
History entries are (p_f, v_f, a_{f-1}) with a_{f-1} the acceleration that led into v_f (0 before the first frame),
so a policy never sees the acceleration it is asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from flowlab.crowd_sim.metrics import collisions as count_collisions
from flowlab.crowd_sim.physics import integrate

__all__ = [
    "InitialStates",
    "Policy",
    "StepState",
    "Trajectories",
    "history_at",
    "recorded_kinematics",
    "simulate",
    "simulate_window",
]


@dataclass(frozen=True)
class StepState:
    """What a policy sees at one frame: positions, velocities, previous accelerations (R, P, 2); history
    (R, P, H, 6); alive (P,) bool; destinations (P, 2); the frame number; the sampling generator; groups (P,) long
    (pedestrians of different groups never interact; None: one group)."""

    positions: torch.Tensor
    velocities: torch.Tensor
    accelerations: torch.Tensor
    history: torch.Tensor
    alive: torch.Tensor
    destinations: torch.Tensor
    frame: int
    generator: torch.Generator | None
    groups: torch.Tensor | None = None

    def pair_mask(self) -> torch.Tensor:
        """(P, P) bool: pairs of distinct alive pedestrians of the same group (who may interact)."""
        alive = self.alive
        pair = alive[:, None] & alive[None, :] & ~torch.eye(alive.numel(), dtype=torch.bool, device=alive.device)
        if self.groups is not None:
            pair = pair & (self.groups[:, None] == self.groups[None, :])
        return pair


Policy = Callable[[StepState], torch.Tensor]  # -> accelerations (R, P, 2) (ignored where not alive)


@dataclass(frozen=True)
class InitialStates:
    """Entry states: positions, velocities (P, 2); history (P, H, 6); entry and exit frames (P,) long."""

    positions: torch.Tensor
    velocities: torch.Tensor
    history: torch.Tensor
    entry: torch.Tensor
    exit: torch.Tensor

    @classmethod
    def from_window(cls, window, *, start: int = 0, history: int = 8) -> InitialStates:
        """States of a recorded window's pedestrians at their entry max(first frame, start); pedestrians that left
        before `start` get an exit frame before their entry (never simulated)."""
        kinematics = recorded_kinematics(window)
        p, v, _ = kinematics
        entry = window.first_frame.clamp_min(start)
        ped = torch.arange(p.shape[1])
        hist = history_at(kinematics, window.first_frame, entry, history)
        e = entry.clamp_max(p.shape[0] - 1)
        return cls(positions=p[e, ped], velocities=v[e, ped], history=hist, entry=entry, exit=window.last_frame)


def history_at(kinematics, first: torch.Tensor, frame: torch.Tensor, length: int) -> torch.Tensor:
    """Recorded history of every pedestrian up to `frame`: (P, length, 6) rows (p, v, a_prev), oldest first; frames
    before a pedestrian's first frame repeat its first state with zero acceleration.

    kinematics: `recorded_kinematics(window)`; first, frame: (P,) long.
    """
    p, v, a_prev = kinematics
    ped = torch.arange(p.shape[1])[:, None]
    frames = frame[:, None] + torch.arange(-length + 1, 1)[None]  # (P, H)
    before = frames < first[:, None]
    frames = torch.maximum(frames, first[:, None]).clamp(0, p.shape[0] - 1)
    hist = torch.cat([p[frames, ped], v[frames, ped], a_prev[frames, ped]], dim=-1)
    hist[..., 4:6] = torch.where(before[..., None], torch.zeros_like(hist[..., 4:6]), hist[..., 4:6])
    return hist


def recorded_kinematics(window) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """positions (T, P, 2), forward-difference velocities (T, P, 2) and previous accelerations
    a_prev[f] = (v_f - v_{f-1}) / dt (0 where f - 1 is absent), from a `Window`."""
    p = window.positions
    v = window.velocities()
    present = window.mask
    a_prev = torch.zeros_like(v)
    both = present[1:] & present[:-1]
    a_prev[1:] = torch.where(both[..., None], (v[1:] - v[:-1]) / window.time_unit, torch.zeros_like(v[1:]))
    return p, v, a_prev


@dataclass(frozen=True)
class Trajectories:
    """A rollout: positions (R, T, P, 2) over frames start..start+T-1, mask (T, P) (alive), collision events (R,),
    wall seconds, network evaluations per simulated frame."""

    positions: torch.Tensor
    mask: torch.Tensor
    collisions: torch.Tensor
    start: int
    seconds: float
    nfe_per_step: int = 0

    @property
    def agent_steps_per_second(self) -> float:
        """Alive pedestrian steps simulated per wall second, over all replicas (NaN when no time was measured)."""
        alive = int(self.mask[:-1].sum()) * self.positions.shape[0]
        return alive / self.seconds if self.seconds > 0 else float("nan")


def _check_initial(initial: InitialStates, destinations: torch.Tensor) -> int:
    P = initial.positions.shape[0]
    for name, x in (("positions", initial.positions), ("velocities", initial.velocities)):
        if x.shape != (P, 2) or not bool(torch.isfinite(x).all()):
            raise ValueError(f"initial_states.{name}: expected finite (P, 2) = ({P}, 2), got {tuple(x.shape)}")
    if initial.history.dim() != 3 or initial.history.shape[0] != P or initial.history.shape[2] != 6:
        raise ValueError(f"initial_states.history: expected ({P}, H, 6), got {tuple(initial.history.shape)}")
    if destinations.shape != (P, 2) or not bool(torch.isfinite(destinations).all()):
        raise ValueError(f"destinations: expected finite shape ({P}, 2), got {tuple(destinations.shape)}")
    return P


def simulate(
    scene,
    initial_states: InitialStates,
    destinations: torch.Tensor,
    steps: int,
    *,
    model: Policy,
    start: int = 0,
    replicas: int = 1,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    collision_threshold: float = 0.5,
    groups: torch.Tensor | None = None,
    keep_entry_speed: bool = False,
    progress: bool = False,
) -> Trajectories:
    """Roll every pedestrian of `scene` forward `steps` frames from frame `start`.

    model: a policy (`EnvSocialDiff.policy(scene)`, `social_force_policy(...)`, `constant_velocity`) mapping a
    `StepState` to accelerations (R, P, 2). Positions are recorded at frames start..start+steps; pedestrian p is alive
    at frame f when entry_p <= f <= exit_p. Speeds are clipped at the scene's `max_speed` (the simulation protocol of
    SPDiff / EnvSocial-Diff), with `keep_entry_speed` at a pedestrian's entry speed where that is higher (forecasting:
    an observed fast walker is never slowed by the clip). groups: (P,) long, independent
    scenes batched as one block-diagonal graph (e.g. many forecasting windows): pedestrians of different groups never
    interact and their collisions are not counted (None: one group). Collision events (pairs closer than
    `collision_threshold` metres, counted once per contiguous run of frames) are counted per replica.
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps: expected a positive integer, got {steps!r}")
    if not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas: expected a positive integer, got {replicas!r}")
    device = torch.device(device)
    P = _check_initial(initial_states, destinations)
    groups = _check_groups(groups, P, device)
    dt = scene.time_unit
    init = {k: getattr(initial_states, k).to(device=device, dtype=torch.float32) for k in ("positions", "velocities")}
    limit = torch.full((P, 1), float(scene.constants.get("max_speed", 2.0)), device=device)
    if keep_entry_speed:
        limit = torch.maximum(limit, init["velocities"].norm(dim=-1, keepdim=True))
    hist0 = initial_states.history.to(device=device, dtype=torch.float32)
    entry, exit_ = initial_states.entry.to(device), initial_states.exit.to(device)
    dest = destinations.to(device=device, dtype=torch.float32)
    pos = init["positions"].expand(replicas, P, 2).clone()
    vel = init["velocities"].expand(replicas, P, 2).clone()
    acc = torch.zeros_like(pos)
    hist = hist0.expand(replicas, *hist0.shape).clone()
    out = torch.zeros(replicas, steps + 1, P, 2, device=device)
    frames = torch.arange(start, start + steps + 1, device=device)
    mask = (entry[None] <= frames[:, None]) & (frames[:, None] <= exit_[None])  # (T, P)
    begin = time.perf_counter()
    for k in tqdm(range(steps + 1), desc="simulate", disable=not progress, leave=False):
        frame = start + k
        entering = entry == frame
        if bool(entering.any()):
            pos[:, entering], vel[:, entering] = init["positions"][entering], init["velocities"][entering]
            acc[:, entering] = 0
            hist[:, entering] = hist0[entering]
        out[:, k] = pos
        if k == steps:
            break
        alive = mask[k]
        state = StepState(pos, vel, acc, hist, alive, dest, frame, generator, groups)
        a = model(state)
        new_pos, new_vel = integrate(pos, vel, a, dt, limit)
        keep = alive[None, :, None]
        acc = torch.where(keep, (new_vel - vel) / dt, acc)
        pos, vel = torch.where(keep, new_pos, pos), torch.where(keep, new_vel, vel)
        entry_now = torch.cat([pos, vel, acc], dim=-1)[:, :, None]
        hist = torch.where(keep[..., None], torch.cat([hist[:, :, 1:], entry_now], dim=2), hist)
    seconds = time.perf_counter() - begin
    coll = torch.tensor(
        [
            count_collisions(out[r].cpu(), mask.cpu(), threshold=collision_threshold, groups=groups)
            for r in range(replicas)
        ]
    )
    nfe = int(getattr(model, "nfe_per_step", 0))
    return Trajectories(positions=out, mask=mask, collisions=coll, start=start, seconds=seconds, nfe_per_step=nfe)


def _check_groups(groups: torch.Tensor | None, P: int, device: torch.device) -> torch.Tensor | None:
    if groups is None:
        return None
    if (
        not isinstance(groups, torch.Tensor)
        or groups.shape != (P,)
        or groups.is_floating_point()
        or groups.dtype == torch.bool
    ):
        got = f"{groups.dtype} {tuple(groups.shape)}" if isinstance(groups, torch.Tensor) else type(groups).__name__
        raise ValueError(f"groups: expected an integer tensor of shape ({P},) (one group id per pedestrian), got {got}")
    return groups.to(device)


def simulate_window(
    scene,
    window,
    model: Policy,
    *,
    steps: int | None = None,
    replicas: int = 1,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> Trajectories:
    """The simulation protocol on a recorded window: every pedestrian enters at its recorded entry state and walks to
    its recorded destination; the first `steps` frames (default: the whole window) are rolled out."""
    n = window.num_frames - 1 if steps is None else min(steps, window.num_frames - 1)
    init = InitialStates.from_window(window)
    return simulate(scene, init, window.destinations, n, model=model, replicas=replicas, generator=generator,
                    device=device, progress=progress)  # fmt: skip
