"""pi-Flow's imitation distillation (pi-ID, data-dependent variant) and the two baselines' objectives, in core time
on the CondOT path x_t = t x_1 + (1 - t) eps (pi-Flow's sigma is 1 - t).

pi-ID, per sample: a segment [t_src, t_end) of one of the NFE grids; x_src = the forward-diffused real x_1; the
student builds its policy there. A detached copy (GM components dropped with probability `gm_dropout`) visits
`num_intermediate` sorted random times of the segment; with trajectory mixing, each interval between visited times
is covered first by the policy's rollout over the share 1 - r and then by one Euler step of the teacher over the
share r (r decays 1 -> 0 over `mix_iters` training steps). At each visited state the non-detached policy's velocity
(or its average over `window_substeps` sub-steps) is regressed onto the teacher's: rescale x MSE. The teacher is
called `num_intermediate` times per step (twice as many while r > 0); the rollout costs no network call.
"""

from __future__ import annotations

from typing import Any

import torch

from flowlab.core.flowmaps import GMPolicy, average_velocity, rollout
from flowlab.core.losses import dmd_loss, fake_score_loss
from flowlab.core.paths import AffinePath
from flowlab.core.schedules import CondOT
from flowlab.core.validation import check_tensor, expand_like
from flowlab.vision_gen.pi_flow.model import PiFlowConfig, Student

__all__ = [
    "DMDPair",
    "dmd_lite_loss",
    "draw_segments",
    "pi_id_loss",
    "segment_grid",
    "teacher_endpoint",
    "teacher_ratio",
    "x0_regression_loss",
]


def segment_grid(nfe: int, final_step_scale: float = 1.0, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """The NFE grid 0 = t_0 < ... < t_nfe = 1 (nfe + 1,): nfe - 1 segments of 1 / (nfe - (1 - f)) and a last
    one f times as long (f = final_step_scale)."""
    if not (isinstance(nfe, int) and nfe >= 1):
        raise ValueError(f"nfe: expected a positive integer, got {nfe!r}")
    if not 0 < final_step_scale <= 1:
        raise ValueError(f"final_step_scale: expected a value in (0, 1], got {final_step_scale!r}")
    base = 1.0 / (nfe - (1 - final_step_scale))
    steps = torch.full((nfe,), base, dtype=torch.float64)
    steps[-1] = final_step_scale * base
    grid = torch.cat([torch.zeros(1, dtype=torch.float64), steps.cumsum(0)])
    grid[-1] = 1.0
    return grid.to(device=device, dtype=dtype)


def teacher_ratio(step: int, mix_iters: int) -> float:
    """Scheduled trajectory mixing: 1 - step / mix_iters, at least 0 (0 throughout when mix_iters is 0)."""
    return max(0.0, 1.0 - step / mix_iters) if mix_iters > 0 else 0.0


def draw_segments(
    batch: int, nfe: tuple[int, ...], final_step_scale: float, *, generator: torch.Generator, device, dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sample one NFE of `nfe` and one of its segments, uniformly: (t_src, t_end), each (B,)."""
    starts, ends = [], []
    for n in nfe:
        grid = segment_grid(n, final_step_scale, dtype=torch.float64)
        starts.append(grid[:-1])
        ends.append(grid[1:])
    # each NFE equally likely, then its segments equally likely
    weights = torch.cat([torch.full((n,), 1.0 / (n * len(nfe)), dtype=torch.float64) for n in nfe])
    pick = torch.multinomial(weights, batch, replacement=True, generator=generator)
    t_src, t_end = torch.cat(starts)[pick], torch.cat(ends)[pick]
    return t_src.to(device=device, dtype=dtype), t_end.to(device=device, dtype=dtype)


def _forward_diffused(x_1: torch.Tensor, t: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    eps = torch.randn(x_1.shape, generator=generator, device=generator.device).to(x_1)
    return AffinePath(CondOT()).sample(eps, x_1, t).x_t


def _source(config: PiFlowConfig, x_1: torch.Tensor, generator: torch.Generator):
    check_tensor(x_1, "x_1")
    t_src, t_end = draw_segments(x_1.shape[0], config.nfe, config.final_step_scale, generator=generator,
                                 device=x_1.device, dtype=x_1.dtype)  # fmt: skip
    return _forward_diffused(x_1, t_src, generator), t_src, t_end


def pi_id_loss(
    student: Student,
    teacher: Any,
    x_1: torch.Tensor,
    config: PiFlowConfig,
    *,
    ratio: float = 0.0,
    generator: torch.Generator,
    **cond: Any,
) -> torch.Tensor:
    """pi-ID on real data x_1: (B, ...) with teacher velocity field teacher(x=, t=, **cond) and teacher ratio
    `ratio` in [0, 1] -> scalar (rescale x mean over the visited states of the elementwise MSE)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio: expected a teacher ratio in [0, 1], got {ratio!r}")
    x, t_src, t_end = _source(config, x_1, generator)
    policy = student(x=x, t=t_src, **cond)
    detached = policy.detach()
    if isinstance(detached, GMPolicy) and config.gm_dropout > 0:
        detached.dropout_(config.gm_dropout, generator=generator)
    u = torch.rand(x.shape[0], config.num_intermediate, generator=generator, device=generator.device)
    times = t_src[:, None] + (t_end - t_src)[:, None] * u.to(x).sort(dim=1).values
    spu, window = config.substeps_per_unit, config.window_substeps / config.substeps_per_unit
    prev, total = t_src, x.new_zeros(())
    for a in range(config.num_intermediate):
        t_a = times[:, a]
        with torch.no_grad():
            mid = prev + (1 - ratio) * (t_a - prev)
            if ratio < 1:
                x = rollout(detached, x, prev, mid, substeps_per_unit=spu)
            if ratio > 0:
                x = x + expand_like(t_a - mid, x) * teacher(x=x, t=mid, **cond)
            target = teacher(x=x, t=t_a, **cond)
        if config.window_substeps >= 2:
            pred = average_velocity(policy, x, t_a, (t_a + window).clamp(max=1 - 1e-4), substeps_per_unit=spu)
        else:
            pred = policy.velocity(x, t_a)
        total = total + (pred - target).pow(2).mean()
        prev = t_a
    return config.rescale * total / config.num_intermediate


class _FieldPolicy:
    """A velocity field with fixed conditions as a `Policy`, so the core `rollout` integrates it."""

    def __init__(self, field: Any, cond: dict[str, Any]) -> None:
        self.field, self.cond = field, cond

    def velocity(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.field(x=x, t=t, **self.cond)


def teacher_endpoint(teacher: Any, x: torch.Tensor, t: torch.Tensor, steps_per_unit: int, **cond: Any):
    """The teacher ODE's endpoint at t = 1 from x: (B, ...) at times t: (B,): the core `rollout`'s Euler steps on
    per-sample uniform grids (round((1 - min t) steps_per_unit) of them, at least 1)."""
    with torch.no_grad():
        return rollout(_FieldPolicy(teacher, cond), x, t, 1.0, substeps_per_unit=steps_per_unit)


def x0_regression_loss(
    student: Student, teacher: Any, x_1: torch.Tensor, config: PiFlowConfig, *, generator: torch.Generator, **cond
) -> torch.Tensor:
    """The x0-regression baseline: the student's data prediction at (x_src, t_src) regressed onto the teacher's
    ODE endpoint from there (`teacher_endpoint`): elementwise MSE -> scalar."""
    x, t_src, _ = _source(config, x_1, generator)
    target = teacher_endpoint(teacher, x, t_src, config.teacher_steps, **cond)
    pred = student(x=x, t=t_src, **cond).predict_data(x, t_src)
    return (pred - target).pow(2).mean()


class DMDPair(torch.nn.Module):
    """DMD-lite's trainable pair: the 1-point `student` (the generator) and the `fake` score field, trained together
    on one optimiser (their gradients are disjoint: the generator loss sees the fake net without grad, the fake
    loss sees the generator's samples detached)."""

    def __init__(self, student: Student, fake: torch.nn.Module) -> None:
        super().__init__()
        self.student, self.fake = student, fake

    def forward(self, *, x: torch.Tensor, t: torch.Tensor, **cond: Any):
        """The student's policy at x: (B, ...), t: (B,) (the generator's forward; the fake field is called directly)."""
        return self.student(x=x, t=t, **cond)


def dmd_lite_loss(
    pair: DMDPair, teacher: Any, x_1: torch.Tensor, config: PiFlowConfig, *, generator: torch.Generator, **cond
) -> torch.Tensor:
    """DMD-lite: the generator's data prediction at (x_src, t_src) is pushed by the reverse-KL gradient between the
    (guided) teacher and the fake score; the fake score flow-matches the generator's samples. Scalar."""
    x, t_src, _ = _source(config, x_1, generator)
    pair = getattr(pair, "module", pair)  # the DDP wrapper's module
    sample = pair(x=x, t=t_src, **cond).predict_data(x, t_src)
    generator_loss = dmd_loss(sample, teacher, pair.fake, generator=generator, **cond)
    return generator_loss + fake_score_loss(pair.fake, sample, generator=generator, **cond)
