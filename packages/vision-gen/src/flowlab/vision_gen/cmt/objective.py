"""Consistency mid-training: teacher trajectories of DPM-Solver++ and the regression of every state onto its
trajectory's endpoint (vision-gen--cmt.md §3), and the post-training step on the core's `ecm_loss`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from flowlab.core.grids import logsnr_uniform
from flowlab.core.losses import ecm_loss, pseudo_huber
from flowlab.core.nets import DenoiserAsTimeModel
from flowlab.core.schedules import EDM
from flowlab.core.solvers import sample_diffusion
from flowlab.vision_gen.cmt.model import METRICS, MidConfig, PostConfig

__all__ = ["Trajectories", "cmt_loss", "distance", "post_loss", "teacher_trajectories"]


@dataclass(frozen=True)
class Trajectories:
    """states: (nfe, b, ...) the solver's states before each step (states[0] = sigma_max noise); sigmas: (nfe,)
    their levels; endpoint: (b, ...) the clean sample each trajectory ends at."""

    states: torch.Tensor
    sigmas: torch.Tensor
    endpoint: torch.Tensor

    def pairs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The stacked training pairs: x (nfe b, ...), sigma (nfe b,), target (nfe b, ...); row i b + j is state i
        of trajectory j and pairs with endpoint j."""
        nfe, b = self.states.shape[:2]
        x = self.states.reshape(nfe * b, *self.states.shape[2:])
        sigma = self.sigmas.repeat_interleave(b)
        return x, sigma, self.endpoint.repeat(nfe, *([1] * (self.endpoint.dim() - 1)))


def teacher_trajectories(
    denoiser: Any,
    noise: torch.Tensor,
    *,
    nfe: int = 16,
    solver: str = "dpmpp_3m",
    sigma_min: float = 0.002,
    sigma_max: float = 80.0,
    **cond: Any,
) -> Trajectories:
    """Run the EDM `denoiser(x=, sigma=, **cond)` with multistep DPM-Solver++ (data prediction, lower-order warm-up
    and final steps) from sigma_max noise: (b, ...) standard normal, `nfe` steps equally spaced in log-SNR to
    sigma_min, keeping every state; no gradient."""
    schedule = EDM(sigma_min=sigma_min, sigma_max=sigma_max)
    grid = logsnr_uniform(nfe, schedule, dtype=torch.float64)
    with torch.no_grad():
        traj = sample_diffusion(
            DenoiserAsTimeModel(denoiser, schedule), sigma_max * noise, grid.to(noise.device), schedule=schedule,
            prediction="data", method=solver, return_trajectory=True, **cond,
        )  # fmt: skip
    sigmas = schedule(grid[:-1]).sigma.to(device=noise.device, dtype=noise.dtype)
    return Trajectories(traj.states[:-1], sigmas, traj.states[-1])


def distance(a: torch.Tensor, b: torch.Tensor, metric: str) -> torch.Tensor:
    """Per-sample distance (B,) between images (B, ...) by `metric` (one of METRICS; pseudo-Huber with the iCT
    constant c = 0.00054 sqrt(D))."""
    if metric not in METRICS:
        raise ValueError(f"metric: expected one of {METRICS}, got {metric!r}")
    sq = (a - b).pow(2).flatten(1).sum(1)
    if metric == "l2":
        return sq
    return pseudo_huber(sq, a[0].numel(), 0.0 if metric == "l2_norm" else None)


def cmt_loss(
    student: Any,
    teacher: Any,
    noise: torch.Tensor,
    config: MidConfig,
    **cond: torch.Tensor,
) -> torch.Tensor:
    """The mid-training loss: mean over the nfe b pairs of d(f(x_sigma_i; sigma_i), sg[x_endpoint]) for b teacher
    trajectories from noise: (b, ...); conditions (b,) are tiled like the pairs (NaNs in a target are zeroed)."""
    traj = teacher_trajectories(teacher, noise, nfe=config.nfe, solver=config.solver, sigma_min=config.sigma_min,
                                sigma_max=config.sigma_max, **cond)  # fmt: skip
    x, sigma, target = traj.pairs()
    tiled = {k: v.repeat(config.nfe, *([1] * (v.dim() - 1))) for k, v in cond.items()}
    out = student(x=x, sigma=sigma, **tiled)
    return distance(out, torch.nan_to_num(target), config.metric).mean()


def post_loss(
    student: Any,
    x_1: torch.Tensor,
    config: PostConfig,
    *,
    step: int,
    teacher: Any = None,
    generator: torch.Generator | None = None,
    **cond: torch.Tensor,
) -> torch.Tensor:
    """One post-training loss on data x_1: (B, ...) (conditions such as labels y= in `cond`): ECT (consistency
    training) or, for "cd", consistency distillation through the EDM `teacher`, with the pairing of `config` at
    `step`."""
    q, stage = config.pairing(step)
    if config.method == "cd" and teacher is None:
        raise ValueError("teacher: consistency distillation (method 'cd') needs the EDM teacher")
    return ecm_loss(
        student, x_1, q=q, stage=stage, k=config.k, b=config.b, p_mean=config.p_mean, p_std=config.p_std, c=config.c,
        teacher=teacher if config.method == "cd" else None, generator=generator, **cond,
    )  # fmt: skip
