"""CMT's MeanFlow branch: the two-time student starts as the teacher, CMT-MF's target is the exact average velocity
on the analytic Gaussian, the few-step sampler of an exact flow map samples the data law, and a tiny MeanFlow
post-training runs through the JVP."""

from __future__ import annotations

import torch

from flowlab.core.nets import DenoiserAsVelocity
from flowlab.vision_gen.cmt import PostConfig, cmt_meanflow_loss, meanflow_samples, meanflow_student, post_train
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig

F64 = torch.float64
MU, S = 0.2, 0.5
TINY = TeacherConfig(family="edm", dim=16, depth=1, steps=4, batch_size=16)


def _m(t):
    """The std of the rectified-flow marginal t x_data + (1 - t) e for data N(MU, S^2)."""
    return torch.sqrt(t**2 * S**2 + (1 - t) ** 2)


class _ExactMap(torch.nn.Module):
    """The exact Gaussian flow map over rectified-flow time, X_{s,t}(x) = t MU + m(t)/m(s) (x - s MU), with its average
    velocity scaled by `scale` (1: exact)."""

    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale

    def velocity(self, *, x, s, t, **cond):
        s4, t4 = s.reshape(-1, 1, 1, 1), t.reshape(-1, 1, 1, 1)
        end = t4 * MU + _m(t4) / _m(s4) * (x - s4 * MU)
        return self.scale * (end - x) / (t4 - s4)

    def forward(self, *, x, s, t, **cond):
        return x + (t - s).reshape(-1, 1, 1, 1) * self.velocity(x=x, s=s, t=t)


def _denoiser(*, x, sigma, **cond):
    return MU + S**2 / (S**2 + sigma.reshape(-1, 1, 1, 1) ** 2) * (x - MU)


def test_student_starts_as_the_teacher_for_every_interval():
    teacher = DigitsTeacher(TINY)
    torch.manual_seed(0)
    for p in teacher.parameters():
        p.data.normal_(0.0, 0.2)
    student = meanflow_student(teacher, init="diffusion")
    x, y = torch.randn(5, 1, 8, 8, generator=torch.Generator().manual_seed(1)), torch.arange(5)
    s = torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9])
    v = DenoiserAsVelocity(teacher.denoiser())(x=x, t=s, y=y)
    for t in (s, torch.ones(5)):
        torch.testing.assert_close(student.velocity(x=x, s=s, t=t, y=y), v)


def test_cmt_meanflow_target_is_the_exact_average_velocity():
    """On exact teacher trajectories the exact average velocity has a loss at the solver's error only."""
    noise = torch.randn(64, 1, 2, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
    kw = {"nfe": 32, "metric": "l2"}
    exact = float(cmt_meanflow_loss(_ExactMap(), _denoiser, noise, generator=torch.Generator().manual_seed(3), **kw))
    off = float(cmt_meanflow_loss(_ExactMap(1.1), _denoiser, noise, generator=torch.Generator().manual_seed(3), **kw))
    assert exact < 1e-2 * off


def test_exact_flow_map_jumps_land_on_the_exact_transport():
    """One jump and two jumps of the exact map from the prior's time 1/81 give the same, exact endpoint (clamped to
    [-1, 1] like every sample)."""
    noise = torch.randn(256, 1, 1, 1, generator=torch.Generator().manual_seed(4), dtype=F64)
    t0 = torch.tensor(1 / 81, dtype=F64)
    x0 = t0 * 80 * noise
    exact = (MU + S / _m(t0) * (x0 - t0 * MU)).clamp(-1, 1)
    for steps in (1, 2):
        x = meanflow_samples(_ExactMap(), torch.zeros(256, dtype=torch.long), steps=steps, noise=noise)
        torch.testing.assert_close(x, exact, rtol=0, atol=1e-9)


def test_tiny_meanflow_post_training_runs_through_the_jvp():
    teacher = DigitsTeacher(TINY)
    data = load_digits_images(8, split="train")
    student = meanflow_student(teacher, init="diffusion")
    before = [p.detach().clone() for p in student.parameters()]
    result = post_train(student, PostConfig(method="meanflow", steps=3, batch_size=8, ema_decay=0.0), data.x, data.y,
                        device="cpu")  # fmt: skip
    after = list(result.student.parameters())
    assert all(bool(torch.isfinite(p).all()) for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before))
