"""The MeanFlow branch: a two-time student on the kit's edm teacher, CMT's average-velocity regression on the
teacher's trajectories (CMT-MF), MeanFlow post-training through the core `meanflow_loss`, and its few-step sampler.

Time is rectified-flow time (t = 1 / (1 + sigma), t = 1 data). The student's average velocity u(x_s, s, t) from s to
t is the teacher's network, converted from EDM denoiser to velocity at s (core `DenoiserAsVelocity`), with the
interval t - s entering every block beside the label through a zero-initialised projection: at initialisation
(diffusion) u(x, s, t) is the teacher's instantaneous velocity v(x, s) for every t. X_{s,t}(x) = x + (t - s) u.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from flowlab.core.losses import meanflow_loss
from flowlab.core.nets import DenoiserAsVelocity, EDMPreconditioner, SinusoidalEmbedding, rf_time
from flowlab.core.nets.labels import check_labels
from flowlab.core.solvers import sample_flow_map
from flowlab.core.validation import expand_like
from flowlab.vision_gen.cmt.model import PostConfig, student_network
from flowlab.vision_gen.cmt.objective import distance, teacher_trajectories
from flowlab.vision_gen.kit.nets import ClassDiT
from flowlab.vision_gen.kit.teachers import DigitsTeacher

__all__ = [
    "IntervalClassDiT",
    "MeanFlowStudent",
    "cmt_meanflow_loss",
    "meanflow_post_loss",
    "meanflow_samples",
    "meanflow_student",
]


class IntervalClassDiT(nn.Module):
    """A `ClassDiT` with a second time: `net(x=, t=, y=, interval=(B,))`, the interval's sinusoidal embedding added to
    the label's through a zero-initialised linear map (so with any interval it starts as the ClassDiT itself)."""

    def __init__(self, net: ClassDiT) -> None:
        super().__init__()
        dim = net.labels.embedding_dim
        self.net = net
        self.interval = nn.Sequential(SinusoidalEmbedding(dim, scale=1000.0), nn.Linear(dim, dim))
        nn.init.zeros_(self.interval[1].weight)
        nn.init.zeros_(self.interval[1].bias)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor, interval: torch.Tensor) -> torch.Tensor:
        """The DiT's output for x: (B, ...), t: (B,), labels y: (B,) and interval: (B,), conditioned on the label plus
        interval embeddings -> (B, ...)."""
        check_labels(y, x.shape[0], self.net.num_classes, allow_null=True)
        cond = self.net.labels(y) + self.interval(interval.to(x.dtype))
        return self.net.net(x=x, t=t, cond=cond)


class MeanFlowStudent(nn.Module):
    """The flow map X_{s,t}(x) = x + (t - s) u(x, s, t) over rectified-flow time: `student(x=, s=, t=, y=)` and
    `student.velocity(x=, s=, t=, y=)`, x: (B, 1, S, S), s <= t: (B,) in (0, 1]."""

    def __init__(self, net: IntervalClassDiT, *, sigma_data: float = 0.5) -> None:
        super().__init__()
        self.field = DenoiserAsVelocity(EDMPreconditioner(net, sigma_data=sigma_data))

    @property
    def net(self) -> IntervalClassDiT:
        """The two-time network (inside the preconditioner; registered once, so state dicts hold each tensor once)."""
        return self.field.denoiser.net

    def velocity(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The average velocity u(x, s, t), the field at time s with interval `t - s`:
        x: (B, 1, S, S), s, t, y: (B,) -> (B, 1, S, S)."""
        return self.field(x=x, t=s, y=y, interval=t - s)

    def forward(self, *, x: torch.Tensor, s: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The flow map `x + (t - s) u(x, s, t)`: x: (B, 1, S, S), s, t, y: (B,) -> (B, 1, S, S)."""
        return x + expand_like(t - s, x) * self.velocity(x=x, s=s, t=t, y=y)


def meanflow_student(teacher: DigitsTeacher, *, init: str, seed: int = 0) -> MeanFlowStudent:
    """A MeanFlow student on the `student_network` of `init` (its interval projection zero). Training mode,
    requires grad."""
    net = IntervalClassDiT(student_network(teacher, init=init, seed=seed))
    student = MeanFlowStudent(net, sigma_data=teacher.config.sigma_data)
    return student.to(next(teacher.parameters()).device).train().requires_grad_(True)


def cmt_meanflow_loss(
    student: MeanFlowStudent,
    teacher: Any,
    noise: torch.Tensor,
    *,
    nfe: int = 16,
    solver: str = "dpmpp_3m",
    metric: str = "l2",
    generator: torch.Generator | None = None,
    **cond: torch.Tensor,
) -> torch.Tensor:
    """CMT-MF: for b teacher trajectories from noise (b, ...), each state i (rectified-flow time t_i, state
    t_i x_sigma_i) paired with one later point j of its trajectory (the endpoint included), drawn uniformly with
    `generator`; the mean of d(u(x_i, t_i, t_j), (x_j - x_i) / (t_j - t_i)), the trajectory's average velocity."""
    traj = teacher_trajectories(teacher, noise, nfe=nfe, solver=solver, **cond)
    ones = torch.ones(1, device=noise.device, dtype=noise.dtype)
    times = torch.cat([rf_time(traj.sigmas), ones])  # (nfe + 1,)
    states = torch.cat([traj.states, traj.endpoint[None]]) * expand_like(times, traj.states)
    b = noise.shape[0]
    i = torch.arange(nfe, device=noise.device).repeat_interleave(b)  # state index of each pair, (nfe b,)
    u = torch.rand(nfe * b, generator=generator, device=generator.device if generator else None).to(noise.device)
    j = i + 1 + (u * (nfe - i).to(u.dtype)).long().clamp_max(nfe - 1 - i)  # uniform in i+1..nfe
    column = torch.arange(b, device=noise.device).repeat(nfe)
    x_i, x_j = states[i, column], states[j, column]
    s, t = times[i], times[j]
    target = (x_j - x_i) / expand_like(t - s, x_i)
    tiled = {k: v.repeat(nfe, *([1] * (v.dim() - 1))) for k, v in cond.items()}
    return distance(student.velocity(x=x_i, s=s, t=t, **tiled), target, metric).mean()


def meanflow_post_loss(
    student: MeanFlowStudent,
    x_1: torch.Tensor,
    config: PostConfig,
    *,
    generator: torch.Generator | None = None,
    **cond: torch.Tensor,
) -> torch.Tensor:
    """MeanFlow on data x_1: (B, ...) along the rectified-flow path x_s = s x_1 + (1 - s) x_0 (core `meanflow_loss`,
    its JVP through the attention by the math kernel, the only one with forward-mode derivatives): (s, t) from two
    logit-normal(mf_p_mean, mf_p_std) draws, sorted, s set to t (plain flow matching) but for a share mf_unequal;
    s at least the time of sigma_max = 80."""
    batch, device = x_1.shape[0], x_1.device
    gen_device = generator.device if generator is not None else None
    z = torch.randn(2, batch, generator=generator, device=gen_device)
    draws = torch.sigmoid(config.mf_p_mean + config.mf_p_std * z)
    s, t = draws.min(0).values, draws.max(0).values
    equal = torch.rand(batch, generator=generator, device=gen_device) >= config.mf_unequal
    s = torch.where(equal, t, s).clamp_min(1 / 81).to(device=device, dtype=x_1.dtype)
    t = torch.maximum(t.to(device=device, dtype=x_1.dtype), s)
    x_0 = torch.randn(x_1.shape, generator=generator, device=gen_device).to(x_1)
    x_s = expand_like(s, x_1) * x_1 + expand_like(1 - s, x_1) * x_0
    with sdpa_kernel(SDPBackend.MATH):
        return meanflow_loss(student, x_s, s, t, x_1 - x_0, **cond)


def meanflow_samples(
    student: MeanFlowStudent,
    labels: torch.Tensor,
    *,
    steps: int,
    noise: torch.Tensor,
    sigma_max: float = 80.0,
    sigma_mid: float = 0.821,
) -> torch.Tensor:
    """Samples (B, 1, S, S) in `steps` (1 or 2) jumps of the flow map from noise (B, 1, S, S) at the time of
    sigma_max (x = t sigma_max noise), the 2-step jump through the time of sigma_mid."""
    if steps not in (1, 2):
        raise ValueError(f"steps: expected 1 or 2, got {steps!r}")
    levels = [sigma_max] if steps == 1 else [sigma_max, sigma_mid]
    grid = torch.tensor([1 / (1 + s) for s in levels] + [1.0], device=noise.device, dtype=noise.dtype)
    with torch.inference_mode():  # no mode-dependent layers: train and eval mode sample alike
        return sample_flow_map(student, grid[0] * sigma_max * noise, grid, y=labels).clamp(-1, 1)
