"""The quality kit: the FD floor's bias shrinking with n, PRDC and the class histogram on real and broken sets,
PSNR/SSIM against closed forms and scikit-image itself, image grids."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.kit.quality import (
    class_histogram,
    digits_prdc,
    fd_floor,
    fd_with_floor,
    image_grid,
    psnr_ssim,
    save_image_grid,
    strip_figure,
)


def test_fd_floor_shrinks_with_n():
    """FD's bias falls with the sample count: the floor at n = 50, 200, 800 decreases, by more than 2x from 50
    to 800 (measured: see the assertion message), and its spread over draws is below its mean."""
    floors = [fd_floor(n, repeats=3) for n in (50, 200, 800)]
    means = [f.floor for f in floors]
    assert means[0] > means[1] > means[2] > 0, means
    assert means[0] > 2 * means[2], means
    assert all(f.floor_std < f.floor for f in floors)
    assert math.isnan(floors[0].fd) and floors[0].n_reference == 270


def test_fd_with_floor_separates_real_from_blurred_digits():
    real = load_digits_images(16, split="val").x
    ok = fd_with_floor(real, pool="train", repeats=3)
    blurred = fd_with_floor(torch.nn.functional.avg_pool2d(real, 3, 1, 1), pool="train", repeats=3)
    assert ok.n == 270 and ok.excess < 3 * ok.floor_std + 0.5 * ok.floor
    assert blurred.excess > 3 * ok.floor  # measured: 5.0x (excess 60.5, floor 12.1 at n = 270)


def test_prdc_real_vs_noise():
    real, test = load_digits_images(16, split="val").x, load_digits_images(16, split="test").x
    good = digits_prdc(real, test)
    noise = digits_prdc(torch.rand(270, 1, 16, 16, generator=torch.Generator().manual_seed(0)) * 2 - 1, test)
    assert good.precision > 0.8 and good.recall > 0.8 and good.coverage > 0.8
    assert noise.precision < 0.05 and noise.coverage < 0.05


def test_class_histogram_on_real_and_collapsed_sets():
    data = load_digits_images(16, split="test")
    real = class_histogram(data.x, data.y)
    assert real.accuracy >= 0.95 and real.tv < 0.05 and abs(real.entropy - math.log(10)) < 0.01
    ones = data.x[data.y == 1]
    collapsed = class_histogram(ones)
    assert collapsed.entropy < 0.3 and collapsed.tv > 0.8 and math.isnan(collapsed.accuracy)
    target = torch.zeros(10, dtype=torch.float64)
    target[1] = 1.0
    assert class_histogram(ones, target=target).tv < 0.1


def test_psnr_ssim_closed_forms_and_library_values():
    """A uniform shift d of [0, 1] images: PSNR = 20 log10(1 / d) exactly. Constant images a, b: SSIM reduces to
    (2ab + C1) / (a^2 + b^2 + C1), C1 = (0.01 * data_range)^2. A noisy camera crop: the same as calling
    scikit-image on the [0, 1] arrays by hand."""
    from skimage import data as skdata
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    base = torch.full((2, 1, 16, 16), 0.2)  # [0, 1] value 0.6 in the kit's [-1, 1]
    shifted = base + 2 * 0.05  # [0, 1] shift 0.05
    q = psnr_ssim(shifted, base)
    assert np.allclose(q.psnr, 20 * math.log10(1 / 0.05), atol=1e-9)
    a, b, c1 = 0.65, 0.6, 1e-4
    assert np.allclose(q.ssim, (2 * a * b + c1) / (a * a + b * b + c1), atol=1e-9)
    camera = torch.as_tensor(skdata.camera()[:64, :64] / 255.0)[None, None]
    noisy = (
        camera + 0.05 * torch.randn(camera.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ).clamp(0, 1)
    q = psnr_ssim(noisy * 2 - 1, camera * 2 - 1)
    ref_p = peak_signal_noise_ratio(camera[0, 0].numpy(), noisy[0, 0].numpy(), data_range=1.0)
    ref_s = structural_similarity(camera[0, 0].numpy(), noisy[0, 0].numpy(), data_range=1.0)
    assert q.mean_psnr == pytest.approx(ref_p, abs=1e-9) and q.mean_ssim == pytest.approx(ref_s, abs=1e-9)
    assert 24 < q.mean_psnr < 28  # 0.05 noise: about 26 dB


def test_image_grid_and_files(tmp_path):
    imgs = torch.linspace(-1, 1, 7)[:, None, None, None].expand(7, 1, 4, 4)
    grid = image_grid(imgs, ncol=3, pad=1)
    assert grid.shape == (1, 3 * 5 + 1, 3 * 5 + 1)
    assert float(grid[0, 1, 1]) == 0.0 and float(grid[0, 0, 0]) == 1.0  # first cell black, padding white
    assert torch.equal(grid[:, 11:15, 6:10], torch.ones(1, 4, 4))  # cell 7 (index 6) is white (value 1)
    save_image_grid(tmp_path / "g.png", imgs, ncol=3, scale=2)
    assert Image.open(tmp_path / "g.png").size == (2 * 16, 2 * 16)
    strip_figure(tmp_path / "s.png", {"a": imgs, "b": imgs[:3]})
    assert (tmp_path / "s.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fd_floor(5000), "n: expected 2 <= n <= 1257"),
        (lambda: fd_floor(100, repeats=1), "repeats: expected an int >= 2"),
        (lambda: fd_with_floor(torch.zeros(10, 16, 16)), r"samples: expected at least 4 dimension"),
        (lambda: class_histogram(torch.zeros(4, 1, 8, 8), torch.zeros(3, dtype=torch.long)), "labels: expected"),
        (lambda: class_histogram(torch.zeros(4, 1, 8, 8), target=torch.ones(10)), "target: expected a histogram"),
        (lambda: psnr_ssim(torch.zeros(2, 1, 8, 8), torch.zeros(2, 1, 8, 7)), "references: expected shape"),
        (lambda: psnr_ssim(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2)), "images: SSIM needs"),
        (lambda: digits_prdc(torch.full((4, 1, 8, 8), math.nan)), "samples: contains NaN"),
        (lambda: image_grid(torch.zeros(2, 1, 4, 4), ncol=0), "ncol, pad: expected"),
        (lambda: strip_figure("x.png", {}), "rows: expected at least one"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
