"""diffusers interoperability: `PiFlowScheduler`, a diffusers scheduler for pi-Flow students, and `PiFlowPipeline`,
a diffusers pipeline of a class-conditional student with it.

Timesteps follow diffusers' flow-matching convention, sigma x num_train_timesteps with sigma = 1 - t (1000 at the
noise end), one per network call. The model output the scheduler steps with is the student's policy (a `GMPolicy`
or `DXPolicy`), which `step` rolls out to the next grid point with cheap Euler sub-steps: one network call per
step, as in `sample_piflow`, and the same numbers.

    pipe = PiFlowPipeline(student=student, scheduler=PiFlowScheduler())
    images = pipe(labels, num_inference_steps=2, generator=torch.Generator().manual_seed(0)).images
"""

from __future__ import annotations

import torch
from diffusers import ConfigMixin, DiffusionPipeline, ImagePipelineOutput, SchedulerMixin
from diffusers.configuration_utils import register_to_config
from diffusers.schedulers.scheduling_utils import SchedulerOutput

from flowlab.core.flowmaps import Policy, rollout
from flowlab.vision_gen.pi_flow.objective import segment_grid

__all__ = ["PiFlowPipeline", "PiFlowScheduler"]


class PiFlowScheduler(SchedulerMixin, ConfigMixin):
    """One grid point per network call (`segment_grid`), the policy rolled out between them with
    `substeps_per_unit` Euler sub-steps per unit time."""

    order = 1

    @register_to_config
    def __init__(
        self, num_train_timesteps: int = 1000, substeps_per_unit: int = 128, final_step_scale: float = 1.0
    ) -> None:
        if substeps_per_unit < 1:
            raise ValueError(f"substeps_per_unit: expected a positive integer, got {substeps_per_unit!r}")
        self.t_grid = torch.zeros(0)
        self.timesteps = torch.zeros(0)

    def set_timesteps(self, num_inference_steps: int, device: torch.device | str | None = None) -> None:
        """The grid of `num_inference_steps` network calls: `t_grid` (n + 1,) in core time, `timesteps` (n,)."""
        self.t_grid = segment_grid(num_inference_steps, self.config.final_step_scale, device=device)
        self.timesteps = (1 - self.t_grid[:-1]) * self.config.num_train_timesteps

    def time_of(self, timestep: torch.Tensor | float) -> tuple[int, torch.Tensor]:
        """(index, core time) of one of `timesteps`."""
        matches = (self.timesteps - float(timestep)).abs() < 1e-4 * self.config.num_train_timesteps
        if not bool(matches.any()):
            raise ValueError(f"timestep: {float(timestep)} is not one of this scheduler's timesteps (set_timesteps)")
        index = int(matches.nonzero()[0, 0])
        return index, self.t_grid[index]

    def step(
        self, model_output: Policy, timestep: torch.Tensor | float, sample: torch.Tensor, return_dict: bool = True
    ) -> SchedulerOutput | tuple[torch.Tensor]:
        """Roll the policy `model_output` built at `sample` out from `timestep` to the next grid point."""
        if not hasattr(model_output, "velocity"):
            raise ValueError(f"model_output: expected the student's policy, got {type(model_output).__name__}")
        index, _ = self.time_of(timestep)
        prev = rollout(model_output, sample, self.t_grid[index], self.t_grid[index + 1],
                       substeps_per_unit=self.config.substeps_per_unit)  # fmt: skip
        return SchedulerOutput(prev_sample=prev) if return_dict else (prev,)


class PiFlowPipeline(DiffusionPipeline):
    """A class-conditional pi-Flow student (`student.policy(x, t, y=)`) with a `PiFlowScheduler`."""

    def __init__(self, student: torch.nn.Module, scheduler: PiFlowScheduler) -> None:
        super().__init__()
        self.register_modules(student=student, scheduler=scheduler)

    @torch.no_grad()
    def __call__(
        self,
        labels: torch.Tensor,
        *,
        num_inference_steps: int = 2,
        generator: torch.Generator | None = None,
        latents: torch.Tensor | None = None,
    ) -> ImagePipelineOutput:
        """Images (B, C, S, S) in about [-1, 1] (as `.images`) for labels (B,), from `latents` or noise drawn
        with `generator`."""
        device = next(self.student.parameters()).device
        if latents is None:
            backbone = self.student.backbone.net
            shape = (labels.shape[0], backbone.in_channels, backbone.image_size, backbone.image_size)
            latents = torch.randn(shape, generator=generator, device=getattr(generator, "device", None)).to(device)
        self.scheduler.set_timesteps(num_inference_steps, device=device)
        x, y = latents, labels.to(device)
        for timestep in self.progress_bar(self.scheduler.timesteps):
            _, t = self.scheduler.time_of(timestep)
            policy = self.student.policy(x, t.to(x.dtype).expand(x.shape[0]), y=y)
            x = self.scheduler.step(policy, timestep, x).prev_sample
        return ImagePipelineOutput(images=x)
