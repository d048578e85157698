"""The kit's restoration pieces: the RealESRGAN-lite degradation, the Fourier grid-artifact loss and energy, tiled
inference with seam blending."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from flowlab.vision_gen.kit.attacks import jpeg
from flowlab.vision_gen.kit.degrade import DegradationConfig, gaussian_blur_per_image, realesrgan_lite
from flowlab.vision_gen.kit.fourier import grid_frequency_mask, masked_fourier_loss, periodic_artifact_energy
from flowlab.vision_gen.kit.photos import photo_crops
from flowlab.vision_gen.kit.tiles import tile_starts, tiled


def _hr(n: int = 6, size: int = 32) -> torch.Tensor:
    return photo_crops("train", size, n, seed=3).x


def test_degradation_shape_range_and_seeding():
    hr = _hr()
    a = realesrgan_lite(hr, generator=torch.Generator().manual_seed(0))
    b = realesrgan_lite(hr, generator=torch.Generator().manual_seed(0))
    c = realesrgan_lite(hr, generator=torch.Generator().manual_seed(1))
    assert a.shape == (6, 3, 8, 8) and float(a.min()) >= -1 and float(a.max()) <= 1
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert realesrgan_lite(hr, DegradationConfig(scale=2), generator=torch.Generator()).shape == (6, 3, 16, 16)


def test_degradation_without_noise_blur_or_jpeg_loss_is_the_bicubic_downsampling():
    hr = _hr()
    clean = DegradationConfig(blur=(0.0, 0.0), noise=(0.0, 0.0), jpeg=(100, 100))
    lq = realesrgan_lite(hr, clean, generator=torch.Generator().manual_seed(0))
    ref = torch.nn.functional.interpolate((hr + 1) / 2, scale_factor=0.25, mode="bicubic", antialias=True)
    torch.testing.assert_close(lq, 2 * jpeg(ref.clamp(0, 1), 100) - 1)


def test_per_image_blur_keeps_the_mean_and_matches_a_single_sigma():
    x = torch.rand(3, 2, 20, 20)
    sigma = torch.tensor([0.0, 1.0, 2.0])
    y = gaussian_blur_per_image(x, sigma)
    torch.testing.assert_close(y[0], x[0])  # sigma 0: unchanged
    torch.testing.assert_close(y[2], gaussian_blur_per_image(x[2:], torch.tensor([2.0]))[0])
    assert float(y[2].std()) < float(y[1].std()) < float(x[1].std())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"hr": torch.zeros(2, 3, 30, 32)}, "multiples of the scale"),
        ({"hr": torch.zeros(2, 2, 32, 32)}, "channels"),
        ({"hr": torch.full((2, 3, 32, 32), float("nan"))}, "finite"),
        ({"hr": torch.zeros(3, 32, 32)}, "hr"),
        ({"config": DegradationConfig, "blur": (2.0, 1.0)}, "blur"),
        ({"config": DegradationConfig, "jpeg": (0, 50)}, "jpeg"),
    ],
)
def test_degradation_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        if kwargs.get("config") is DegradationConfig:
            DegradationConfig(**{k: v for k, v in kwargs.items() if k != "config"})
        realesrgan_lite(kwargs.get("hr", _hr(2)), generator=torch.Generator())


def _pattern(size: int = 32, period: int = 4, seed: int = 0) -> torch.Tensor:
    """(1, 1, size, size): one random zero-mean period x period tile repeated."""
    tile = torch.randn(1, 1, period, period, generator=torch.Generator().manual_seed(seed))
    return (tile - tile.mean()).repeat(1, 1, size // period, size // period)


def _noise(n: int = 8, size: int = 32, seed: int = 1) -> torch.Tensor:
    return torch.randn(n, 1, size, size, generator=torch.Generator().manual_seed(seed))


def test_grid_mask_selects_the_multiples_of_the_side_over_the_period():
    mask = grid_frequency_mask(16, 16, 4)
    rows, cols = torch.nonzero(mask, as_tuple=True)
    assert set(rows.tolist()) | set(cols.tolist()) <= {0, 4, 8, 12} and int(mask.sum()) == 15  # 4 x 4 - DC
    assert int(grid_frequency_mask(16, 16, 4, radius=1).sum()) == 16 * 9 - 9


def test_artifact_energy_is_one_on_noise_and_linear_in_a_planted_pattern():
    assert abs(float(periodic_artifact_energy(_noise(64, 64), period=4).mean()) - 1) < 0.15
    amps = np.array([2.0, 4.0, 6.0, 8.0])
    energy = [float(periodic_artifact_energy(_noise(size=64) + a * _pattern(64), period=4).mean()) for a in amps]
    slope, _ = np.polyfit(amps, energy, 1)
    assert slope > 0 and np.corrcoef(amps, energy)[0, 1] > 0.99


def test_masked_fourier_loss_sees_exactly_a_planted_grid_pattern_and_only_amplitudes():
    clean = _noise()
    assert float(masked_fourier_loss(clean, clean, period=4)) == 0.0
    planted = clean + 3 * _pattern()
    big = float(masked_fourier_loss(planted, clean, period=4))
    assert big > 0.5
    off_grid = torch.cos(2 * torch.pi * 3 * torch.arange(32.0) / 32)[None, None, None, :]  # 3 cycles: not on the grid
    assert float(masked_fourier_loss(clean + 3 * off_grid, clean, period=4, radius=0)) < 1e-5 * big
    shifted = torch.roll(planted, shifts=(1, 3), dims=(-2, -1))
    assert abs(float(masked_fourier_loss(shifted, torch.roll(clean, (1, 3), (-2, -1)), period=4)) - big) < 1e-4 * big
    y = planted.clone().requires_grad_(True)
    masked_fourier_loss(y, clean, period=4).backward()
    assert float(y.grad.abs().sum()) > 0


def test_fourier_bad_input_names_the_argument():
    x = torch.zeros(2, 1, 16, 16)
    with pytest.raises(ValueError, match="period"):
        periodic_artifact_energy(x, period=1)
    with pytest.raises(ValueError, match="multiples of the period"):
        periodic_artifact_energy(torch.zeros(2, 1, 18, 16), period=4)
    with pytest.raises(ValueError, match="y_ref"):
        masked_fourier_loss(x, torch.zeros(2, 1, 8, 8), period=4)
    with pytest.raises(ValueError, match="margin"):
        masked_fourier_loss(x, x, period=4, margin=-1.0)
    with pytest.raises(ValueError, match="y"):
        masked_fourier_loss(torch.full_like(x, float("nan")), x, period=4)


def test_tile_starts_cover_the_axis_with_the_overlap():
    assert tile_starts(10, 16, 4) == [0]
    starts = tile_starts(100, 32, 8)
    assert starts[0] == 0 and starts[-1] == 68 and all(b - a <= 24 for a, b in itertools.pairwise(starts))


def test_tiled_is_exact_for_a_pointwise_map_and_close_for_a_small_conv():
    x = torch.rand(2, 3, 50, 70)
    torch.testing.assert_close(tiled(lambda t: 2 * t + 1, x, tile=16, overlap=4), 2 * x + 1)
    up = tiled(lambda t: t.repeat_interleave(2, -2).repeat_interleave(2, -1), x, tile=16, overlap=4, scale=2)
    torch.testing.assert_close(up, x.repeat_interleave(2, -2).repeat_interleave(2, -1))
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 3, 3, padding=1)
    with torch.no_grad():
        full = conv(x)
        blended = tiled(conv, x, tile=24, overlap=8)
        seamed = tiled(conv, x, tile=24, overlap=0)
    assert float((blended - full).abs().max()) < 0.2 * float((seamed - full).abs().max())  # the seams fade


def test_tiled_bad_input_names_the_argument():
    x = torch.rand(1, 3, 20, 20)
    with pytest.raises(ValueError, match="overlap"):
        tiled(lambda t: t, x, tile=8, overlap=4)
    with pytest.raises(ValueError, match="tile"):
        tiled(lambda t: t, x, tile=0, overlap=0)
    with pytest.raises(ValueError, match="fn"):
        tiled(lambda t: t[..., :-1], x, tile=8, overlap=2)
    with pytest.raises(ValueError, match="x"):
        tiled(lambda t: t, torch.rand(3, 20, 20), tile=8, overlap=2)
