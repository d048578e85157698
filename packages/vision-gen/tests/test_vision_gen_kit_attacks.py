"""The attack kit's watermark-removal pieces (rotation, straight-through training attacks, averaging and forgery,
regeneration, PGD) and the digits perceptual distance: their defining properties and named bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flowlab.core.schedules import DiscreteVP
from flowlab.vision_gen.kit.attacks import (
    average_residual,
    forge,
    inversion_pgd,
    parse_attack,
    pgd,
    regenerate,
    remove_residual,
    resolve_attack,
    straight_through,
)
from flowlab.vision_gen.kit.metrics import DigitsFeatureNet
from flowlab.vision_gen.kit.nets import UNetField, tiny_unet
from flowlab.vision_gen.kit.perceptual import digits_perceptual
from flowlab.vision_gen.kit.sampling import invert_to_noise

pytestmark = pytest.mark.usefixtures("one_thread")


def _images(n: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 1, 16, 16, generator=torch.Generator().manual_seed(seed))


def test_rotation_by_zero_and_full_turns_is_identity():
    x = _images()
    assert torch.equal(parse_attack("rotate@0")(x), x)
    assert torch.equal(parse_attack("rotate@360")(x), x)
    assert not torch.allclose(parse_attack("rotate@15")(x), x)


def test_straight_through_forwards_the_attack_and_passes_gradients():
    x = _images().requires_grad_(True)
    jpeg = parse_attack("jpeg@50")
    y = straight_through(jpeg)(x)
    assert torch.allclose(y, jpeg(x.detach()), atol=1e-6)
    (y * torch.arange(16.0)).sum().backward()
    assert torch.equal(x.grad, torch.arange(16.0).expand_as(x))


def test_averaging_one_image_is_identity_and_residuals_round_trip():
    x = _images()
    assert torch.equal(average_residual(x[:1]), x[:1])
    mark = 0.05 * torch.randn(1, 1, 16, 16, generator=torch.Generator().manual_seed(1))
    clean = _images(64, seed=2) * 0.8 + 0.1
    residual = average_residual(clean + mark, clean)
    assert torch.allclose(residual, mark, atol=1e-6)
    assert torch.allclose(remove_residual(clean[:4] + mark, residual), clean[:4], atol=1e-6)
    assert torch.allclose(forge(clean[:4], residual), clean[:4] + mark, atol=1e-6)
    with pytest.raises(ValueError, match="clean"):
        average_residual(x, torch.rand(2, 1, 8, 8))
    with pytest.raises(ValueError, match="watermarked"):
        average_residual(torch.full((1, 1, 4, 4), float("nan")))


class _Oracle(nn.Module):
    """An epsilon predictor that knows the clean image is 0.5 everywhere (so one Tweedie step recovers it)."""

    schedule = DiscreteVP.linear()

    def forward(self, xt: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        coef = self.schedule(t.double())
        alpha, sigma = (c.float().view(-1, 1, 1, 1) for c in (coef.alpha, coef.sigma))
        return (xt - alpha * 0.0) / sigma  # x0 = 0 in [-1, 1], i.e. 0.5 in [0, 1]


def test_regeneration_with_an_oracle_denoiser_returns_its_image():
    x = _images()
    out = regenerate(x, _Oracle(), 0.5, generator=torch.Generator().manual_seed(0))
    assert out.shape == x.shape and torch.allclose(out, torch.full_like(x, 0.5), atol=1e-5)
    with pytest.raises(ValueError, match="strength"):
        regenerate(x, _Oracle(), 1.0)


def test_an_evaluation_spec_resolves_to_the_identity_a_registered_attack_or_regeneration():
    x = _images()
    assert resolve_attack("clean")(x) is x
    assert torch.equal(resolve_attack("jpeg@50")(x), parse_attack("jpeg@50")(x))
    regen = resolve_attack("regenerate@0.3", denoiser=_Oracle(), data_range=0.75)
    out = regen(x, generator=torch.Generator().manual_seed(3))
    expected = regenerate(x, _Oracle(), 0.3, data_range=0.75, generator=torch.Generator().manual_seed(3))
    assert torch.equal(out, expected) and torch.allclose(out, torch.full_like(x, 0.5), atol=1e-5)
    for spec, kwargs, name in (("regenerate@0.2", {}, "denoiser"), ("regenerate@1", {"denoiser": _Oracle()},
                               "strength"), ("regenerate@x", {"denoiser": _Oracle()}, "strength"),
                               ("sharpen@2", {}, "attack")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            resolve_attack(spec, **kwargs)


def test_pgd_increases_the_loss_inside_the_ball():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 256, 3))
    x, target = _images(), torch.rand(4, 3)

    def loss(img: torch.Tensor) -> torch.Tensor:
        return nn.functional.binary_cross_entropy_with_logits(net(img), target)

    adv = pgd(x, loss, eps=0.05, steps=5)
    with torch.no_grad():
        assert float(loss(adv)) > float(loss(x))
        assert torch.equal(pgd(x, loss, eps=0.05, steps=5), adv)  # it turns gradients on inside a no-grad caller
    assert float((adv - x).abs().max()) <= 0.05 + 1e-6 and adv.min() >= 0 and adv.max() <= 1
    for bad, match in (({"eps": float("nan")}, "eps"), ({"steps": 0}, "steps")):
        with pytest.raises(ValueError, match=match):
            pgd(x, loss, **bad)


def test_perceptual_distance_is_zero_on_equal_images_and_differentiable():
    torch.manual_seed(0)
    net = DigitsFeatureNet().requires_grad_(False)
    x = _images() * 2 - 1
    assert float(digits_perceptual(x, x, net)) == 0.0
    y = x.clone().requires_grad_(True)
    loss = digits_perceptual(y + 0.1, x, net)
    loss.backward()
    assert loss > 0 and y.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="x, y"):
        digits_perceptual(x, x[:, :, :8], net)


def _tiny_field() -> UNetField:
    torch.manual_seed(0)
    return UNetField(tiny_unet(8, base_channels=8).eval(), schedule=DiscreteVP.linear())


def test_the_differentiable_inversion_is_the_inversion_with_a_graph():
    """invert_to_noise(differentiable=True) gives the inference-mode noise to the bit, with gradients back to the
    images; the fixed-point (exact) inversion is refused with it."""
    field, x = _tiny_field(), 2 * _images(3)[..., :8, :8] - 1
    plain = invert_to_noise(field, x, steps=4)
    leaf = x.clone().requires_grad_(True)
    with torch.no_grad():  # the flag wins over a caller's no-grad block
        graphed = invert_to_noise(field, leaf, steps=4, differentiable=True)
    assert torch.equal(graphed.detach(), plain)
    (grad,) = torch.autograd.grad(graphed.pow(2).sum(), leaf)
    assert bool(torch.isfinite(grad).all()) and float(grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="exact"):
        invert_to_noise(field, x, steps=4, exact=True, differentiable=True)


def test_inversion_pgd_flips_recovered_noise_signs_more_than_random_signs_inside_the_ball():
    """`inversion_pgd` stays in the L-infinity ball and [0, 1], and lowers the share of recovered-noise signs that
    agree with the unattacked images' below what a random ±eps perturbation of the same size leaves; "pgd@eps"
    resolves to it with a denoiser and is refused without one or outside (0, 1)."""
    field, x = _tiny_field(), 0.25 + 0.5 * _images(8)[..., :8, :8]
    eps = 0.01  # PGD leaves 0.70 of the signs, the random perturbation 0.83 (a random-weight UNet)

    def agreement(images):
        reference = invert_to_noise(field, 2 * x - 1, steps=10).sign()
        return float((invert_to_noise(field, 2 * images - 1, steps=10).sign() == reference).float().mean())

    adv = inversion_pgd(x, field, eps=eps)
    signs = torch.randint(0, 2, x.shape, generator=torch.Generator().manual_seed(1)).float() * 2 - 1
    assert float((adv - x).abs().max()) <= eps + 1e-6 and float(adv.min()) >= 0 and float(adv.max()) <= 1
    assert agreement(adv) < agreement((x + eps * signs).clamp(0, 1)) - 0.08
    assert torch.equal(resolve_attack(f"pgd@{eps}", denoiser=field)(x), adv)
    for spec, kwargs in (("pgd@0.03", {}), ("pgd@1.5", {"denoiser": field}), ("pgd@x", {"denoiser": field})):
        with pytest.raises(ValueError, match="denoiser" if not kwargs else "strength"):
            resolve_attack(spec, **kwargs)
