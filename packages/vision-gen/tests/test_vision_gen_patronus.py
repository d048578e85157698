"""Patronus's pieces against their definitions: the activation formula on a hand-built case, the 1x1-convolution
distance against brute force, the receptive-field arithmetic against the empirical gradient support, s computed
from x_0 (invariant to x_t), boosting by zero and fixed-noise regeneration exact, the activation prior's moments,
the explanation procedures' shapes, and bad inputs to every main entry point."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.patronus.encoder import PrototypeEncoder, activation
from flowlab.vision_gen.patronus.evaluate import ddpm_quality, prototype_diversity, sample_quality
from flowlab.vision_gen.patronus.explain import (
    boost_and_regenerate,
    dot_prototype,
    emergence_curve,
    localisation_score,
    manipulate,
    shortcut_shift,
)
from flowlab.vision_gen.patronus.model import ModelConfig, patronus_model
from flowlab.vision_gen.patronus.prior import PriorConfig, train_activation_prior
from flowlab.vision_gen.patronus.sample import sample_images
from flowlab.vision_gen.patronus.train import TrainConfig, train_patronus

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ModelConfig(num_prototypes=4, enc_channels=(8, 8), enc_kernels=(3, 1), enc_strides=(1, 1),
                   enc_paddings=(0, 0), base_channels=8)  # fmt: skip


def _live(config: ModelConfig = TINY, seed: int = 0):
    """An untrained model whose per-block condition projections and output convolution are random (not zero), so s
    matters and gradients flow."""
    model = patronus_model(config, seed=seed)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.field.named_parameters():
            if "cond_proj" in name or "conv_out" in name:
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
    return model.eval()


@pytest.fixture(scope="module")
def digits() -> torch.Tensor:
    return load_digits_images(8, split="val").x[:12]


def test_activation_is_log_one_over_eps_at_zero_distance(digits):
    enc = PrototypeEncoder(1, 8, channels=(8, 8), kernels=(3, 1), strides=(1, 1), paddings=(0, 0), num_prototypes=3)
    enc = enc.double()
    z = enc.features(digits[:1].double())
    with torch.no_grad():
        enc.prototypes[1] = z[0, :, 2, 3]
    out = enc(digits[:1].double())
    assert float(out.d2_min[0, 1].detach()) == pytest.approx(0.0, abs=1e-12)
    assert (
        float(out.s[0, 1].detach()) == pytest.approx(math.log(1e4), abs=1e-6)
        and abs(float(out.s[0, 1].detach()) - 9.21) < 5e-3
    )
    assert int(out.argmin_cell[0, 1]) == 2 * enc.cells + 3
    d2 = torch.linspace(0, 50, 101, dtype=torch.float64)
    s = activation(d2)
    assert bool((s >= 0).all()) and bool((s[1:] < s[:-1]).all())


def test_conv_distance_equals_brute_force():
    enc = PrototypeEncoder(1, 8, channels=(6, 5), kernels=(3, 1), strides=(1, 1), paddings=(0, 0),
                           num_prototypes=7).double()  # fmt: skip
    g = torch.Generator().manual_seed(1)
    z = torch.rand(3, 5, 6, 6, generator=g, dtype=torch.float64)
    conv = enc.distances(z)
    brute = ((z[:, None] - enc.prototypes.detach()[None, :, :, None, None]) ** 2).sum(2)
    assert conv.shape == (3, 7, 6, 6)
    torch.testing.assert_close(conv, brute, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "kernels, strides, paddings",
    [((3, 3, 1), (1, 1, 1), (0, 0, 0)), ((3, 3, 3), (2, 1, 1), (1, 0, 0)), ((3, 3), (2, 2), (1, 1))],
)
def test_receptive_field_equals_gradient_support(kernels, strides, paddings):
    size = 16
    torch.manual_seed(0)
    enc = PrototypeEncoder(1, size, channels=(16,) * len(kernels), kernels=kernels, strides=strides,
                           paddings=paddings).double()  # fmt: skip
    x = torch.randn(6, 1, size, size, dtype=torch.float64, requires_grad=True)
    z = enc.features(x)
    assert z.shape[-1] == enc.cells
    masks = enc.receptive_masks()
    for row, col in ((0, 0), (enc.cells - 1, enc.cells - 1), (enc.cells // 2, 1)):
        (grad,) = torch.autograd.grad(z[:, :, row, col].sum(), x, retain_graph=True)
        support = grad.abs().sum((0, 1)) > 0
        rows, cols = enc.receptive_field((row, col))
        expected = torch.zeros(size, size, dtype=torch.bool)
        expected[rows, cols] = True
        assert torch.equal(support, expected), (row, col)
        assert torch.equal(masks[row * enc.cells + col], expected)


def test_condition_comes_from_x0_not_xt(digits):
    model = _live()
    seen = []
    model.field.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs), with_kwargs=True)
    for seed in (0, 1):
        model.loss(digits, generator=torch.Generator().manual_seed(seed))
    assert not torch.equal(seen[0]["x"], seen[1]["x"])  # different x_t ...
    torch.testing.assert_close(seen[0]["cond"], seen[1]["cond"], atol=0, rtol=0)  # ... the same s
    torch.testing.assert_close(seen[0]["cond"], model.condition(digits))


def test_gradients_reach_encoder_and_prototypes(digits):
    model = _live().train()
    loss, logs = model.loss(digits, generator=torch.Generator().manual_seed(0))
    loss.backward()
    assert model.encoder.prototypes.grad.abs().sum() > 0
    assert model.encoder.features[0].weight.grad.abs().sum() > 0
    assert set(logs) == {"regression"}


def test_regeneration_is_deterministic_and_boost_zero_exact(digits):
    model = _live()
    s = model.condition(digits).detach()
    noise = torch.randn(digits.shape, generator=torch.Generator().manual_seed(3))
    a = sample_images(model, s, noise, steps=4)
    assert torch.equal(a, sample_images(model, s, noise, steps=4))
    assert torch.equal(a, boost_and_regenerate(model, noise, s, 2, 0.0, steps=4))
    boosted = boost_and_regenerate(model, noise, s, 2, 3.0, steps=4)
    assert not torch.equal(a, boosted)
    scaled = manipulate(model, noise, s, 2, (0.0, 1.0), steps=4)
    assert scaled.shape == (2, *digits.shape)
    torch.testing.assert_close(scaled[1], a, atol=1e-3, rtol=0)  # batch-size-dependent conv rounding


def test_activation_prior_matches_moments():
    g = torch.Generator().manual_seed(0)
    mean, std = torch.tensor([2.0, 4.0, 6.0]), torch.tensor([0.5, 1.0, 1.5])
    data = mean + std * torch.randn(2000, 3, generator=g)
    prior = train_activation_prior(data, PriorConfig(width=64, depth=2, steps=500, lr=3e-3))
    with torch.inference_mode():
        s = prior.sample(torch.randn(2000, 3, generator=g), steps=20)
    assert bool((s >= 0).all())
    torch.testing.assert_close(s.mean(0), mean, atol=0.25, rtol=0)
    torch.testing.assert_close(s.std(0), std, atol=0, rtol=0.25)


def test_explanations_have_their_shapes(digits):
    model = _live()
    s = model.condition(digits).detach()
    noise = torch.randn(digits.shape, generator=torch.Generator().manual_seed(0))
    curve = emergence_curve(model, noise, s, steps=3)
    assert curve.shape == (3, 4) and bool(torch.isfinite(curve).all())
    loc = localisation_score(model, digits, noise, s.max(0).values + 2, steps=3, n_random=4)
    assert loc.heat.shape == (4, 8, 8) and loc.prototypes == (0, 1, 2, 3)
    assert 0 <= loc.metrics["inside"] <= 1 and 0 <= loc.metrics["random"] <= 1
    assert loc.metrics["area"] == pytest.approx(9 / 64)  # 3x3 fields of the tiny encoder
    assert loc.metrics["gain_lo"] <= loc.metrics["gain"] <= loc.metrics["gain_hi"]
    assert loc.metrics["gain_boosted_lo"] <= loc.metrics["gain_boosted"] <= loc.metrics["gain_boosted_hi"]
    unmoved = localisation_score(model, digits, noise, s.min(0).values, steps=3)  # no boost: nothing changes
    assert unmoved.metrics == {"area": loc.metrics["area"], "n": 0}
    j, rise = dot_prototype(model, digits)
    assert rise.shape == (4,) and j == int(rise.argmax())
    metrics, before, after = shortcut_shift(model, digits, noise, j, 9.0, steps=2)
    assert before.shape == after.shape == digits.shape
    assert metrics["shift"] == pytest.approx(metrics["share_after"] - metrics["share_before"])
    div = prototype_diversity(model)
    assert -1 <= div["cos_mean"] <= div["cos_max"] <= 1


def test_receptive_area_of_the_quick_encoder():
    model = patronus_model(ModelConfig())
    enc = model.prototype_encoder
    assert (enc.cells, enc.rf_size, enc.rf_jump, enc.rf_offset) == (6, 3, 1, 0)
    assert float(enc.receptive_masks().float().mean()) == pytest.approx(9 / 64)


def test_train_and_quality_rows_at_toy_size(digits):
    """The quick version of the slow FD check: a few steps of Patronus and its prior give every quality row."""
    model = train_patronus(TINY, TrainConfig(steps=3, batch_size=8), digits, device="cpu")
    prior = train_activation_prior(model.condition(digits).detach(), PriorConfig(width=16, depth=1, steps=3))
    row = sample_quality(model, prior, digits, steps=2)
    assert {"fd", "fd_floor", "fd_uncond"} <= set(row) and all(math.isfinite(v) for v in row.values())
    from flowlab.vision_gen.kit.train import _field

    field = _field("core_unet", 8, 1, 8).eval()
    assert set(ddpm_quality(field, n=12, size=8, steps=2)) == {"fd", "fd_uncond", "fd_floor"}


@pytest.mark.slow
def test_quick_scale_reconstruction_fd_within_1p5x_plain_ddpm():
    from flowlab.vision_gen.kit.train import train_digits_denoiser

    train, test = load_digits_images(8, split="train"), load_digits_images(8, split="test")
    model = train_patronus(ModelConfig(), TrainConfig(steps=1200, lr=1e-3), train.x, device="cpu")
    ours = sample_quality(model, None, test.x, steps=20)
    field = train_digits_denoiser(train.x, steps=1200, batch_size=64, lr=1e-3, base_channels=16, arch="core_unet")
    assert ours["fd"] <= 1.5 * ddpm_quality(field, n=270, size=8, steps=20)["fd"]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m, x, s, n: m.encoder(x[:, :, :7]), "x: expected"),
        (lambda m, x, s, n: m.encoder(x.masked_fill(x > 0, float("nan"))), "x: contains NaN"),
        (lambda m, x, s, n: sample_images(m, s[:, :3], n), "cond: expected"),
        (lambda m, x, s, n: sample_images(m, s, n[:, :, :4, :4]), "noise: expected"),
        (lambda m, x, s, n: sample_images(m, s, n, steps=0), "steps: expected"),
        (lambda m, x, s, n: sample_images(m, s * float("nan"), n), "cond: contains NaN"),
        (lambda m, x, s, n: boost_and_regenerate(m, n, s, 4, 1.0), "j: expected"),
        (lambda m, x, s, n: boost_and_regenerate(m, n, s, 0, float("inf")), "boost: expected"),
        (lambda m, x, s, n: manipulate(m, n, s, 0, (-1.0,)), "scales: expected"),
        (lambda m, x, s, n: localisation_score(m, x, n, s[0, :3]), "target: expected"),
        (lambda m, x, s, n: localisation_score(m, x, n, s[0], n_random=0), "n_random: expected"),
        (lambda m, x, s, n: train_patronus(TINY, TrainConfig(steps=1), x[:, :, :4], device="cpu"), "images: expected"),
        (lambda m, x, s, n: train_patronus(TINY, TrainConfig(steps=1), x.long(), device="cpu"), "images: expected"),
        (lambda m, x, s, n: train_patronus(TINY, TrainConfig(steps=1), x * float("nan"), device="cpu"), "images:"),
        (lambda m, x, s, n: train_activation_prior(s[0], PriorConfig()), "activations: expected"),
        (lambda m, x, s, n: train_activation_prior(s * float("inf"), PriorConfig()), "activations: contains"),
        (lambda m, x, s, n: ModelConfig(variant="vae"), "variant: expected"),
        (lambda m, x, s, n: ModelConfig(size=12), "size: expected"),
        (lambda m, x, s, n: ModelConfig(enc_kernels=(3, 3)), "enc_channels"),
        (lambda m, x, s, n: ModelConfig(proto_init="zeros"), "proto_init: expected"),
        (lambda m, x, s, n: TrainConfig(lr=float("nan")), "lr: expected"),
        (lambda m, x, s, n: PriorConfig(steps=0), "steps: expected"),
        (lambda m, x, s, n: patronus_model(ModelConfig(variant="diffae")).prototype_encoder, "no prototypes"),
    ],
)
def test_bad_inputs_name_the_argument(digits, call, message):
    model = _live()
    s = model.condition(digits).detach()
    with pytest.raises(ValueError, match=message):
        call(model, digits, s, torch.randn(digits.shape))
