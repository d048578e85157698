"""What EnvSocial-Diff learns: the scaled ego-frame residual acceleration of every pedestrian, by the DDPM epsilon
loss of the core (`ddpm_loss`) weighted per pedestrian.

Teacher forcing: every recorded frame of the training windows is one graph of the pedestrians present; the target of
pedestrian i is its recorded acceleration (v_{t+1} - v_t) / dt minus the destination force towards its goal (the
model's goal model, `goals`), in its ego frame, divided
by the model's `scale`; loss E_k ||eps - eps_theta(alpha_k x + sigma_k eps, k, c)||^2 over uniform DDPM steps k,
averaged over the pedestrians with a valid target (present at t, t+1, t+2). The rollout fine-tuning of `train`
builds `FrameBatch`es of the same kind from the model's own rollouts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import torch

from flowlab.core.losses import ddpm_loss
from flowlab.core.schedules import DiscreteVP
from flowlab.crowd_sim.envsocial_diff.features import StepInputs
from flowlab.crowd_sim.envsocial_diff.goals import anchored_goals
from flowlab.crowd_sim.envsocial_diff.model import EnvSocialDenoiser
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff
from flowlab.crowd_sim.geometry import to_ego
from flowlab.crowd_sim.simulate import StepState, history_at, recorded_kinematics

__all__ = [
    "FrameBatch",
    "concat",
    "epsilon_loss",
    "pack_frames",
    "residual_target",
    "training_frames",
    "training_goals",
    "unpack_frames",
]


@dataclass(frozen=True)
class FrameBatch:
    """Training batch: inputs of N pedestrians, scaled ego-frame targets (N, 2), loss weights (N,)."""

    inputs: StepInputs
    target: torch.Tensor
    weight: torch.Tensor


def residual_target(
    model: EnvSocialDiff, inputs: StepInputs, accel: torch.Tensor, state: StepState, ped: torch.Tensor
) -> torch.Tensor:
    """Scaled ego-frame residual of world accelerations accel: (N, 2) for the flat pedestrians `ped` (N,)."""
    p = state.positions.reshape(-1, 2)[ped]
    v = state.velocities.reshape(-1, 2)[ped]
    g = state.destinations[ped % state.destinations.shape[0]]
    residual = accel - model.destination_force(p, v, g)
    return to_ego(residual, inputs.rotations) / model.scale


def training_frames(model: EnvSocialDiff, scene, windows, *, stride: int = 1) -> list[FrameBatch]:
    """One `FrameBatch` per recorded frame (every `stride`-th) with at least one valid target (teacher forcing).
    The inputs hold every branch's features, so the frames serve every configuration."""
    env = model.environment(scene, all_branches=True)
    frames = []
    H = model.config.features.history
    for w in windows:
        kinematics = recorded_kinematics(w)
        p, v, a_prev = kinematics
        valid = torch.zeros_like(w.mask)
        valid[:-2] = w.mask[:-2] & w.mask[1:-1] & w.mask[2:]
        first = w.first_frame
        for t in range(0, w.num_frames - 2, stride):
            if not bool(valid[t].any()):
                continue
            hist = history_at(kinematics, first, torch.full_like(first, t), H)
            goals = training_goals(model.config, w, kinematics, t)
            state = StepState(p[t][None], v[t][None], a_prev[t][None], hist[None], w.mask[t], goals, t, None)
            state = _to(state, model.device)
            inputs, ped = model.inputs(state, env)  # one replica: the flat index is the pedestrian
            a_t = ((v[t + 1] - v[t]) / w.time_unit)[ped.cpu()].to(model.device)
            target = residual_target(model, inputs, a_t, state, ped)
            weight = valid[t, ped.cpu()].float().to(model.device)
            frames.append(FrameBatch(inputs, torch.where(weight[:, None] > 0, target, 0), weight))
    return frames


def training_goals(config, window, kinematics, frame: int) -> torch.Tensor:
    """(P, 2): the goals of `window`'s pedestrians at recorded frame `frame` under the model's goal model
    (`config.goal`): the recorded destinations, or constant-velocity goals anchored as `goals.anchored_goals` says."""
    if config.goal == "recorded":
        return window.destinations
    return anchored_goals(kinematics, window.first_frame, frame, config.goal_every, config.goal_lookahead)


def _to(state: StepState, device) -> StepState:
    return StepState(
        *(x.to(device) for x in (state.positions, state.velocities, state.accelerations, state.history)),
        state.alive.to(device),
        state.destinations.to(device),
        state.frame,
        state.generator,
    )


def concat(parts: Sequence[FrameBatch]) -> FrameBatch:
    """The pedestrians of several batches as one batch (the graphs stay disjoint)."""
    return FrameBatch(
        StepInputs.cat([p.inputs for p in parts]),
        torch.cat([p.target for p in parts]),
        torch.cat([p.weight for p in parts]),
    )


def pack_frames(frames: Sequence[FrameBatch]) -> dict[str, torch.Tensor]:
    """`frames` as a flat dict of tensors (for `torch.save` and a `weights_only` load): their `concat` and "sizes"
    (F, 4) long, each frame's pedestrians, edges, environment tokens and lighting tokens. `unpack_frames` inverts it
    exactly."""
    if not frames:
        raise ValueError("frames: expected at least one FrameBatch")
    whole = concat(frames)
    sizes = [[f.inputs.num_nodes, f.inputs.edge_index.shape[1], f.inputs.env.shape[1], f.inputs.light.shape[1]]
             for f in frames]  # fmt: skip
    packed = {f"inputs.{f.name}": getattr(whole.inputs, f.name) for f in fields(StepInputs)}
    return packed | {"target": whole.target, "weight": whole.weight, "sizes": torch.tensor(sizes, dtype=torch.long)}


def unpack_frames(packed: Mapping[str, torch.Tensor]) -> list[FrameBatch]:
    """The frames of `pack_frames` (views into the packed tensors), each equal to the frame that was packed."""
    sizes = packed["sizes"]
    nodes = [0, *torch.cumsum(sizes[:, 0], 0).tolist()]
    edges = [0, *torch.cumsum(sizes[:, 1], 0).tolist()]
    tokens = {"env": 2, "env_category": 2, "env_mask": 2, "light": 3, "light_mask": 3}
    frames = []
    for i, row in enumerate(sizes.tolist()):
        a, b, e0, e1 = nodes[i], nodes[i + 1], edges[i], edges[i + 1]
        parts = {}
        for f in fields(StepInputs):
            x = packed[f"inputs.{f.name}"]
            if f.name == "edge_index":
                parts[f.name] = x[:, e0:e1] - a
            elif f.name == "edge_attr":
                parts[f.name] = x[e0:e1]
            elif f.name in tokens:
                parts[f.name] = x[a:b, : row[tokens[f.name]]]
            else:
                parts[f.name] = x[a:b]
        frames.append(FrameBatch(StepInputs(**parts), packed["target"][a:b], packed["weight"][a:b]))
    return frames


def epsilon_loss(
    denoiser: EnvSocialDenoiser, batch: FrameBatch, generator: torch.Generator, schedule: DiscreteVP
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The weighted epsilon loss of `batch` at uniform DDPM steps k, and the number of targets it weighs.

    Per pedestrian the squared error summed over the two coordinates (`ddpm_loss` averages over them; doubling the
    mean of two floats is exact), then sum_i w_i l_i / sum_i w_i."""
    x, w = batch.target, batch.weight
    per = x.shape[-1] * ddpm_loss(
        denoiser, x, schedule, generator=generator, reduction="none", cond=denoiser.encode(batch.inputs)
    )
    return (per * w).sum() / w.sum().clamp_min(1e-8), {"targets": w.sum()}
