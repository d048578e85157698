"""CMT: the teacher trajectories and their pairs on the analytic Gaussian, the fixed point of mid-training, the
students' initialisations, the pairing schedules, the gradient-bias estimator, and a tiny mid- and post-training."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.vision_gen.cmt import (
    MidConfig,
    PostConfig,
    Trajectories,
    cmt_loss,
    consistency_student,
    few_step_samples,
    gradient_bias,
    mid_train,
    oracle_endpoint,
    post_train,
    teacher_trajectories,
)
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig, digits_teacher

F64 = torch.float64
MU, S = 0.2, 0.5
TINY = TeacherConfig(family="edm", dim=16, depth=1, steps=4, batch_size=16)


def _gaussian_denoiser(*, x, sigma, **cond):
    """The exact E[x_0 | x_sigma] of data N(MU, S^2 I)."""
    return MU + S**2 / (S**2 + sigma.reshape(-1, 1, 1, 1) ** 2) * (x - MU)


def _gaussian_map(*, x, sigma, **cond):
    """The exact probability-flow map from level sigma to 0 (the flow map CMT regresses onto)."""
    return MU + S / torch.sqrt(S**2 + sigma.reshape(-1, 1, 1, 1) ** 2) * (x - MU)


def test_trajectories_follow_the_exact_ode_on_the_log_snr_grid():
    """With the exact Gaussian teacher every kept state is the closed-form ODE solution at its level, the levels are
    equally spaced in log sigma from 80 to 0.002, and the endpoint is the exact flow-map endpoint (to solver
    accuracy: DPM-Solver++(3M), 16 steps, measured 2.6 % of S)."""
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(64, 1, 2, 2, generator=g, dtype=F64)
    traj = teacher_trajectories(_gaussian_denoiser, noise, nfe=16)
    assert traj.states.shape == (16, 64, 1, 2, 2) and traj.sigmas.shape == (16,)
    logs = traj.sigmas.log()
    torch.testing.assert_close(logs, torch.linspace(math.log(80.0), math.log(0.002), 17, dtype=F64)[:-1])
    x80 = 80.0 * noise
    for i in (0, 5, 15):
        sigma = float(traj.sigmas[i])
        exact = MU + math.sqrt((S**2 + sigma**2) / (S**2 + 80.0**2)) * (x80 - MU)
        assert (traj.states[i] - exact).abs().max() < 0.03 * max(1.0, sigma)
    endpoint = _gaussian_map(x=x80, sigma=torch.full((64,), 80.0, dtype=F64))
    assert (traj.endpoint - endpoint).abs().max() < 0.05 * S


def test_mid_training_target_is_the_flow_map_endpoint():
    """The fixed point of mid-training is the teacher's flow map: with the exact teacher, the exact map's loss is
    at the solver's error, far below a map that is off by a level-dependent factor."""
    config = MidConfig(nfe=64, batch_size=64 * 32, metric="l2")
    noise = torch.randn(32, 1, 2, 2, generator=torch.Generator().manual_seed(1), dtype=F64)
    exact = float(cmt_loss(_gaussian_map, _gaussian_denoiser, noise, config))

    def off(*, x, sigma, **cond):
        return _gaussian_map(x=x, sigma=sigma) * (1 + 0.1 * torch.tanh(sigma).reshape(-1, 1, 1, 1))

    assert exact < 1e-2 * float(cmt_loss(off, _gaussian_denoiser, noise, config))


def test_pairs_tile_states_with_their_own_trajectory_endpoint():
    nfe, b = 3, 4
    states = torch.arange(nfe * b, dtype=F64).reshape(nfe, b, 1)
    endpoint = 100 + torch.arange(b, dtype=F64).reshape(b, 1)
    x, sigma, target = Trajectories(states, torch.tensor([3.0, 2.0, 1.0], dtype=F64), endpoint).pairs()
    for i in range(nfe):
        for j in range(b):
            row = i * b + j
            assert float(x[row, 0]) == float(states[i, j, 0]) and float(target[row, 0]) == 100 + j
            assert float(sigma[row]) == 3.0 - i


def test_students_start_where_their_initialisation_says():
    teacher = DigitsTeacher(TINY)
    torch.manual_seed(0)
    for p in teacher.parameters():  # away from the DiT's zero-initialised output, so weights show in the output
        p.data.normal_(0.0, 0.2)
    x = torch.randn(6, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    sigma, y = torch.exp(torch.linspace(-4, 4, 6)), torch.arange(6)
    diffusion = consistency_student(teacher, init="diffusion")
    torch.testing.assert_close(diffusion(x=x, sigma=sigma, y=y), teacher.denoiser()(x=x, sigma=sigma, y=y))
    random = consistency_student(teacher, init="random", seed=3)
    assert not torch.allclose(random(x=x, sigma=sigma, y=y), diffusion(x=x, sigma=sigma, y=y))
    again = consistency_student(teacher, init="random", seed=3)
    torch.testing.assert_close(random(x=x, sigma=sigma, y=y), again(x=x, sigma=sigma, y=y))
    diffusion.eval()  # the boundary condition of evaluation mode: f(x; sigma_min) = x exactly
    torch.testing.assert_close(diffusion(x=x, sigma=torch.full((6,), 0.002), y=y), x)
    with pytest.raises(ValueError, match="init"):
        consistency_student(teacher, init="ema")


def test_pairing_schedules():
    const = PostConfig(method="ect", steps=80, q=4096.0)
    assert const.pairing(0) == const.pairing(79) == (4096.0, 0)
    doubling = PostConfig(method="ect_doubling", steps=80, stages=8)
    assert [doubling.pairing(s)[1] for s in (0, 9, 10, 79)] == [0, 0, 1, 7]
    with pytest.raises(ValueError, match="method"):
        PostConfig(method="meanflow_x")
    with pytest.raises(ValueError, match="multiple of nfe"):
        MidConfig(batch_size=100, nfe=16)


def test_oracle_endpoint_is_the_exact_flow_map_endpoint():
    """Per-sample Heun solves from states at different levels reach the closed-form endpoint of the Gaussian ODE
    (64 Karras levels: measured 0.6 % of S at t = 55)."""
    g = torch.Generator().manual_seed(5)
    t = torch.exp(torch.linspace(-4, 4, 32, dtype=F64))
    x_t = MU + torch.sqrt(S**2 + t**2).reshape(-1, 1, 1, 1) * torch.randn(32, 1, 2, 2, generator=g, dtype=F64)
    out = oracle_endpoint(_gaussian_denoiser, x_t, t, steps=64)
    torch.testing.assert_close(out, _gaussian_map(x=x_t, sigma=t), rtol=0, atol=0.01 * S)


class _ScaledMap(torch.nn.Module):
    """The exact Gaussian flow map with its slope scaled by a parameter a (a = 1: exact), on (B, 1, 2, 2)."""

    sigma_min = 0.002

    def __init__(self, a: float):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(a, dtype=F64))

    def forward(self, *, x, sigma, **cond):
        return MU + self.a * S / torch.sqrt(S**2 + sigma.reshape(-1, 1, 1, 1) ** 2) * (x - MU)


def test_gradient_bias_is_small_at_the_flow_map_and_grows_away_from_it():
    """At the exact map both gradients vanish as the pairing step shrinks (the oracle's exactly, the consistency
    one as O(dt)), so the bias is a small fraction of the bias of a map whose slope is 10 % off."""
    images = MU + S * torch.randn(512, 1, 2, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    labels = torch.zeros(512, dtype=torch.long)
    config = PostConfig(q=4096.0)
    exact = gradient_bias(_ScaledMap(1.0), _gaussian_denoiser, images, labels, config, batch_size=128, batches=2,
                          metric="l2")  # fmt: skip
    off = gradient_bias(_ScaledMap(1.1), _gaussian_denoiser, images, labels, config, batch_size=128, batches=2,
                        metric="l2")  # fmt: skip
    assert exact.bias < 1e-3 * off.bias
    assert off.relative > 0.9  # the consistency gradient barely sees a global slope error (measured 0.9996)


def test_tiny_mid_and_post_training_learn():
    """Mid-training lowers its own loss on fixed trajectories; post-training returns a finite curve with the
    first point at step 0 and the last at the final step, and 1- and 2-step samples of the right shape."""
    teacher = digits_teacher(TINY)
    config = MidConfig(steps=60, batch_size=64, nfe=8, lr=3e-3, ema_decay=0.0)
    noise = torch.randn(8, 1, 8, 8, generator=torch.Generator().manual_seed(4))
    y = torch.arange(8) % 10
    before = consistency_student(teacher, init="diffusion")
    student = mid_train(teacher, config, device="cpu").student
    with torch.no_grad():
        start = float(cmt_loss(before, teacher.denoiser(), noise, config, y=y))
        end = float(cmt_loss(student, teacher.denoiser(), noise, config, y=y))
    assert end < 0.8 * start
    data = load_digits_images(8, split="train")
    calls = []

    def measure(model, step):
        calls.append(step)
        x = few_step_samples(model, y, steps=2, noise=noise, generator=torch.Generator().manual_seed(0))
        assert x.shape == (8, 1, 8, 8) and bool(torch.isfinite(x).all())
        return {"mean": float(x.mean())}

    result = post_train(student, PostConfig(steps=6, batch_size=16, eval_every=4), data.x, data.y, device="cpu",
                        evaluate=measure)  # fmt: skip
    assert calls == [0, 4, 6] and [s for s, _ in result.curve] == [0, 4, 6]
    cd = post_train(consistency_student(teacher, init="diffusion"), PostConfig(method="cd", steps=2, batch_size=8),
                    data.x, data.y, teacher=teacher, device="cpu")  # fmt: skip
    assert all(bool(torch.isfinite(p).all()) for p in cd.student.parameters())


def test_python_entry_points_refuse_bad_input():
    teacher = DigitsTeacher(TINY)
    data = load_digits_images(8, split="train")
    with pytest.raises(ValueError, match="teacher"):
        consistency_student(DigitsTeacher(TeacherConfig(family="rf", dim=16, depth=1)), init="diffusion")
    with pytest.raises(ValueError, match="steps: expected 1 or 2"):
        few_step_samples(consistency_student(teacher, init="diffusion"), torch.arange(2), steps=3,
                         noise=torch.zeros(2, 1, 8, 8))  # fmt: skip
    with pytest.raises(ValueError, match="sigma_min"):
        oracle_endpoint(_gaussian_denoiser, torch.zeros(2, 1, 2, 2), torch.tensor([1.0, 0.001]))
    with pytest.raises(ValueError, match="MeanFlowStudent"):
        post_train(consistency_student(teacher, init="diffusion"), PostConfig(method="meanflow", steps=1), data.x,
                   data.y, device="cpu")  # fmt: skip
    with pytest.raises(ValueError, match="images, labels"):
        post_train(consistency_student(teacher, init="diffusion"), PostConfig(steps=1), data.x[:, 0], data.y,
                   device="cpu")  # fmt: skip
    with pytest.raises(ValueError, match="metric"):
        MidConfig(metric="lpips")
    with pytest.raises(ValueError, match="eval_every"):
        PostConfig(eval_every=-1)
