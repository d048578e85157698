"""Sampling a trained variant with classifier-free guidance on the core's solvers: rectified flow by Euler steps in
t (`solve_ode`), DDPM by DDIM (`sample_diffusion`). The guided branch's null labels route its tokens to ProMoE's
unconditional expert by themselves."""

from __future__ import annotations

import torch

from flowlab.core.grids import trailing, uniform
from flowlab.core.nets.dit import DiT
from flowlab.core.schedules import DiscreteVP
from flowlab.core.solvers import sample_diffusion, solve_ode
from flowlab.core.typing import Prediction
from flowlab.core.validation import check_tensor
from flowlab.vision_gen.promoe.names import OBJECTIVES

__all__ = ["sample_digits"]


def sample_digits(
    model: DiT, labels: torch.Tensor, noise: torch.Tensor, *, objective: str = "rf", steps: int = 50,
    cfg_scale: float = 1.0,
) -> torch.Tensor:  # fmt: skip
    """Images (B, 1, S, S) of `labels` (B,) from `noise` (B, 1, S, S) in `steps` steps at guidance `cfg_scale` (1:
    the conditional model, no guidance pass), clamped to [-1, 1]; `model` in eval mode, under inference mode."""
    check_tensor(noise, "noise")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: expected one of {OBJECTIVES}, got {objective!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"steps: expected an integer >= 1, got {steps!r}")
    if not (isinstance(cfg_scale, int | float) and cfg_scale >= 0):
        raise ValueError(f"cfg_scale: expected a number >= 0, got {cfg_scale!r}")
    field = model if cfg_scale == 1 else model.guided(cfg_scale)
    with torch.inference_mode():
        if objective == "ddpm":
            schedule = DiscreteVP.linear()
            grid = trailing(schedule, steps, device=noise.device)
            x = sample_diffusion(field, noise, grid, schedule=schedule, prediction=Prediction.EPSILON, method="ddim",
                                 y=labels)  # fmt: skip
        else:
            x = solve_ode(field, noise, uniform(steps, device=noise.device), method="euler", y=labels)
    return x.clamp(-1, 1)
