"""The kit's report statistics: the bootstrap interval covers the mean and narrows with n; the linear probe reads a
linearly separable label and not a random one; the core-UNet digits denoiser arch (the plain DDPM baseline)."""

from __future__ import annotations

import pytest
import torch

from flowlab.vision_gen.kit.nets import CoreUNetField
from flowlab.vision_gen.kit.stats import bootstrap_interval, linear_probe_accuracy
from flowlab.vision_gen.kit.train import ARCHS, DigitsDenoiserConfig, train_digits_denoiser


def test_bootstrap_interval_covers_the_mean_and_narrows():
    g = torch.Generator().manual_seed(0)
    small, large = torch.randn(50, generator=g) + 1, torch.randn(5000, generator=g) + 1
    mean, low, high = bootstrap_interval(small)
    assert low < mean < high and low < 1 < high
    _, low2, high2 = bootstrap_interval(large)
    assert high2 - low2 < (high - low) / 5
    assert bootstrap_interval(small, seed=3) == bootstrap_interval(small, seed=3)


def test_linear_probe_reads_separable_labels_only():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 5, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long()
    assert linear_probe_accuracy(x[:300], y[:300], x[300:], y[300:]) > 0.9
    noise = torch.randint(0, 2, (400,), generator=g)
    assert linear_probe_accuracy(x[:300], noise[:300], x[300:], noise[300:]) < 0.7


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: bootstrap_interval(torch.ones(1)), "values: expected"),
        (lambda: bootstrap_interval(torch.ones(4), level=1.0), "level: expected"),
        (lambda: bootstrap_interval(torch.ones(4), resamples=2), "resamples: expected"),
        (lambda: linear_probe_accuracy(torch.ones(4), torch.zeros(4), torch.ones(4, 1), torch.zeros(4)), "train_x"),
        (lambda: linear_probe_accuracy(torch.ones(4, 2), torch.zeros(4), torch.ones(4, 3), torch.zeros(4)), "test_x"),
        (lambda: linear_probe_accuracy(torch.ones(4, 2), torch.zeros(4), torch.ones(4, 2), torch.zeros(4)), "two"),
    ],
)
def test_stats_bad_inputs(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_core_unet_denoiser_arch(one_thread):
    assert "core_unet" in ARCHS and DigitsDenoiserConfig().arch == "unet"
    images = torch.rand(16, 1, 8, 8) * 2 - 1
    field = train_digits_denoiser(images, steps=2, batch_size=4, base_channels=8, arch="core_unet")
    assert isinstance(field, CoreUNetField) and not field.training
    out = field(x=images[:3], t=torch.full((3,), 0.5))
    assert out.shape == (3, 1, 8, 8)
    with pytest.raises(ValueError, match="y: a CoreUNetField"):
        field(x=images[:3], t=torch.full((3,), 0.5), y=torch.zeros(3, dtype=torch.long))
