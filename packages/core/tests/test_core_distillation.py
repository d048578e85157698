"""The distillation pieces: DMD's generator loss and fake-score update, the softplus GAN losses, the pi-Flow
output heads, the GM temperature, and the exact checkerboard velocity."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.flowmaps import DXPolicy, GMPolicy
from flowlab.core.flowmaps.heads import DXHead, GMHead
from flowlab.core.losses.distillation import (
    dmd_gradient,
    dmd_loss,
    fake_score_loss,
    gan_discriminator_loss,
    gan_generator_loss,
    gan_losses,
)
from flowlab.core.testing.analytic import GaussianMixture
from flowlab.core.testing.checkerboard import Checkerboard


def _gaussian(mean: float):
    """The exact CondOT velocity of data N(mean, I) in 2-D."""
    problem = GaussianMixture(torch.ones(1), torch.full((1, 2), mean), torch.ones(1, 2))
    return lambda *, x, t: problem.velocity(x, t)


def test_dmd_gradient_of_the_surrogate_is_the_normalised_score_difference():
    torch.manual_seed(0)
    x = torch.randn(5, 3, requires_grad=True)
    real, fake = torch.randn(5, 3), torch.randn(5, 3)
    grad = dmd_gradient(x.detach(), real, fake)
    scale = (x.detach() - real).abs().mean(1, keepdim=True)
    torch.testing.assert_close(grad, (fake - real) / scale)
    target = x.detach() - grad
    (0.5 * (x - target).pow(2).mean()).backward()
    torch.testing.assert_close(x.grad, grad / x.numel())


def test_dmd_loss_pushes_samples_from_the_fake_towards_the_teacher_distribution():
    """Teacher N(2, I), fake N(0, I) (the generator's current law): the KL gradient points from 0 to 2, so a
    gradient step on the samples moves their mean up; with fake == teacher the gradient vanishes."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 2, generator=g).requires_grad_(True)
    dmd_loss(x, _gaussian(2.0), _gaussian(0.0), generator=g).backward()
    assert float(-x.grad.mean()) > 0
    x.grad = None
    dmd_loss(x, _gaussian(2.0), _gaussian(2.0), generator=g).backward()
    assert float(x.grad.abs().max()) < 1e-9


def test_fake_score_loss_is_minimal_at_the_exact_velocity_of_the_samples():
    g = torch.Generator().manual_seed(1)
    samples = 2.0 + torch.randn(20000, 2, generator=g)
    exact = fake_score_loss(_gaussian(2.0), samples, generator=torch.Generator().manual_seed(2))
    wrong = fake_score_loss(_gaussian(0.0), samples, generator=torch.Generator().manual_seed(2))
    assert float(exact) < float(wrong) - 0.5


def test_gan_losses_are_the_softplus_forms():
    logits = torch.tensor([-1.0, 0.0, 2.0])
    sp = torch.nn.functional.softplus
    torch.testing.assert_close(gan_generator_loss(logits), sp(-logits).mean())
    torch.testing.assert_close(gan_discriminator_loss(logits, -logits), sp(-logits).mean() + sp(-logits).mean())
    assert math.isclose(float(gan_generator_loss(torch.zeros(4))), math.log(2), rel_tol=1e-6)


def test_gan_losses_route_each_gradient_to_its_own_player():
    torch.manual_seed(0)
    disc = torch.nn.Linear(3, 1)
    gen = torch.nn.Linear(2, 3)
    real, fake = torch.randn(8, 3), gen(torch.randn(8, 2))
    g_loss, d_loss = gan_losses(disc, real, fake)
    torch.testing.assert_close(g_loss, gan_generator_loss(disc(fake)))
    torch.testing.assert_close(d_loss, gan_discriminator_loss(disc(real), disc(fake)))
    g_loss.backward(retain_graph=True)
    assert disc.weight.grad is None and gen.weight.grad is not None  # the generator term leaves D alone
    gen.zero_grad()
    d_loss.backward()
    assert disc.weight.grad is not None and gen.weight.grad is None  # ... and D's leaves G


def test_distillation_bad_inputs_raise_value_errors():
    x = torch.randn(4, 2)
    with pytest.raises(ValueError, match="s_min, s_max"):
        dmd_loss(x, _gaussian(0.0), _gaussian(0.0), s_min=0.5, s_max=0.5)
    with pytest.raises(ValueError, match="real"):
        dmd_gradient(x, torch.randn(4, 3), x)
    with pytest.raises(ValueError, match="x"):
        dmd_loss(torch.full((4, 2), math.nan), _gaussian(0.0), _gaussian(0.0))
    with pytest.raises(ValueError, match="fake_logits"):
        gan_generator_loss(torch.tensor([math.inf]))


def test_gm_head_splits_channels_and_zero_output_is_the_source_point():
    head = GMHead(3)
    assert head.out_channels(2) == 12
    x_src, t_src = torch.randn(4, 2, 5, 5), torch.full((4,), 0.25)
    raw = torch.randn(4, 12, 5, 5)
    policy = head(raw, x_src, t_src)
    assert isinstance(policy, GMPolicy)
    assert policy.means.shape == (4, 3, 2, 5, 5) and policy.logits.shape == (4, 3, 1, 5, 5)
    assert policy.logstd.shape == (4, 3, 1, 1, 1)
    torch.testing.assert_close(policy.means, raw[:, :6].reshape(4, 3, 2, 5, 5))
    torch.testing.assert_close(policy.logstd[:, :, 0, 0, 0], raw[:, 9:].mean(dim=(2, 3)))
    zero = head(torch.zeros(4, 12, 5, 5), x_src, t_src)  # velocity 0: every component at x_src
    torch.testing.assert_close(zero.predict_data(x_src, t_src), x_src)
    flat = head(torch.randn(4, 3 * 4), torch.randn(4, 2), t_src)  # vectors: one Gaussian mixture over the event
    assert flat.means.shape == (4, 3, 2) and flat.logits.shape == (4, 3, 1)
    with pytest.raises(ValueError, match="raw"):
        head(torch.randn(4, 11, 5, 5), x_src, t_src)


def test_dx_head_spans_the_horizon_and_constant_velocities_are_one_data_point():
    head = DXHead(4)
    x_src, t_src, t_end = torch.randn(3, 1, 2, 2), torch.tensor([0.0, 0.2, 0.5]), torch.tensor([0.5, 1.0, 0.75])
    u = torch.randn(3, 1, 2, 2)
    policy = head(u.repeat(1, 4, 1, 1), x_src, t_src, t_end)
    assert isinstance(policy, DXPolicy)
    torch.testing.assert_close(policy.t_grid[:, 0], t_src)
    torch.testing.assert_close(policy.t_grid[:, -1], t_end)
    want = x_src + (1 - t_src)[:, None, None, None] * u
    torch.testing.assert_close(policy.predict_data(x_src, (t_src + t_end) / 2), want)
    with pytest.raises(ValueError, match="t_end"):
        head(u.repeat(1, 4, 1, 1), x_src, t_src, t_src)


def test_gm_temperature_scales_logits_and_variances():
    policy = GMPolicy(torch.randn(2, 3, 4), torch.zeros(2, 3, 1), torch.randn(2, 3, 1), torch.randn(2, 4),
                      torch.full((2,), 0.3))  # fmt: skip
    logits = policy.logits.clone()
    policy.temperature_(0.5)
    torch.testing.assert_close(policy.logits, logits / 0.5)
    torch.testing.assert_close(policy.logstd, torch.full((2, 3, 1), 0.5 * math.log(0.5)))
    with pytest.raises(ValueError, match="temperature"):
        policy.temperature_(0.0)


def test_checkerboard_samples_lie_on_the_board_and_the_posterior_mean_matches_monte_carlo():
    """Posterior mean at three (x, t) by self-normalised importance sampling of 400k data draws (kernel-free:
    exact Gaussian likelihood weights), agreement within 0.02."""
    board = Checkerboard()
    g = torch.Generator().manual_seed(0)
    data = board.sample_data(400_000, generator=g).double()
    cells = torch.floor(data)
    assert bool((cells.sum(1) % 2 == 0).all()) and float(data.abs().max()) <= 2
    for t, point in ((0.1, (0.3, -0.4)), (0.5, (0.3, -0.4)), (0.8, (-1.2, 0.9))):
        x = torch.tensor([point], dtype=torch.float64)
        log_w = -((x - t * data) ** 2).sum(1) / (2 * (1 - t) ** 2)
        mc = (torch.softmax(log_w, 0)[:, None] * data).sum(0)
        exact = board.posterior_mean(x, torch.tensor([t], dtype=torch.float64))[0]
        torch.testing.assert_close(exact, mc, atol=0.02, rtol=0)
    far = board.posterior_mean(torch.full((1, 2), 50.0), torch.tensor([0.99]))
    assert torch.isfinite(far).all() and float(far.max()) <= 2.0
    torch.testing.assert_close(board.posterior_mean(torch.randn(4, 2), torch.zeros(4)), torch.zeros(4, 2), atol=1e-3,
                               rtol=0)  # fmt: skip
