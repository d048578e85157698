"""Sampling a pi-Flow student: per step one network call builds the policy, which is rolled out to the next grid
point with cheap Euler sub-steps (no further network call)."""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.flowmaps import GMPolicy, rollout
from flowlab.core.validation import check_tensor
from flowlab.vision_gen.pi_flow.objective import segment_grid

__all__ = ["sample_piflow"]


def sample_piflow(
    student: Any,
    x_init: torch.Tensor,
    *,
    nfe: int,
    substeps_per_unit: int = 128,
    temperature: float = 1.0,
    final_step_scale: float = 1.0,
    **cond: Any,
) -> torch.Tensor:
    """Samples (B, ...) from noise x_init: (B, ...) at t = 0 in `nfe` network calls of `student.policy(x, t,
    **cond)`; a GM policy's `temperature` applies to every step but the last (pi-Flow's inference option)."""
    check_tensor(x_init, "x_init")
    if not hasattr(student, "policy"):
        raise ValueError(f"student: expected a pi-Flow Student with policy(x, t), got {type(student).__name__}")
    grid = segment_grid(nfe, final_step_scale, device=x_init.device, dtype=x_init.dtype)
    x = x_init
    with torch.inference_mode():
        for k in range(nfe):
            t = grid[k].expand(x.shape[0])
            policy = student.policy(x, t, **cond)
            if isinstance(policy, GMPolicy) and k < nfe - 1:
                policy.temperature_(temperature)
            x = rollout(policy, x, grid[k], grid[k + 1], substeps_per_unit=substeps_per_unit)
    return x
