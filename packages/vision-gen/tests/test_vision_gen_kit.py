"""The vision kit: digits split, attack kit properties, the tiny UNet and DiT fields, their training and cache, and the
core DDIM / DPM-Solver++ on them against diffusers."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from flowlab.core.artifacts import is_cached
from flowlab.core.grids import trailing
from flowlab.core.losses import ddpm_loss
from flowlab.core.schedules import DiscreteVP
from flowlab.core.threads import torch_threads
from flowlab.vision_gen.kit import (
    SMALL_SUITE,
    DigitsDenoiserConfig,
    DiTField,
    UNetField,
    apply_suite,
    compose,
    digits_denoiser,
    digits_denoiser_artifact,
    digits_split_indices,
    generate,
    invert_to_noise,
    load_digits_images,
    parse_attack,
    tiny_dit,
    tiny_unet,
    train_digits_denoiser,
)


def test_digits_split_is_fixed_stratified_and_disjoint():
    s = digits_split_indices()
    assert (len(s["train"]), len(s["val"]), len(s["test"])) == (1257, 270, 270)
    assert not (set(s["train"]) & set(s["test"])) and not (set(s["val"]) & set(s["test"]))
    d = load_digits_images(16, split="test")
    assert d.x.shape == (270, 1, 16, 16) and float(d.x.min()) == -1.0 and float(d.x.max()) == 1.0
    assert np.bincount(d.y.numpy()).min() >= 26  # stratified: 27 +- 1 per class
    with pytest.raises(ValueError, match="size"):
        load_digits_images(12)


def test_attacks_preserve_shape_range_and_are_reproducible():
    x = (load_digits_images(16, split="val").x[:6] + 1) / 2
    a = apply_suite(x, "small", generator=torch.Generator().manual_seed(0))
    b = apply_suite(x, "small", generator=torch.Generator().manual_seed(0))
    assert set(a) == set(SMALL_SUITE)
    for k in a:
        assert a[k].shape == x.shape and float(a[k].min()) >= 0 and float(a[k].max()) <= 1, k
        assert torch.equal(a[k], b[k]), k
    mse = float(((parse_attack("jpeg@100")(x) - x) ** 2).mean())
    assert 10 * math.log10(1 / max(mse, 1e-12)) > 40  # near identity
    grey = torch.full((64, 1, 16, 16), 0.5)
    noisy = parse_attack("gaussian_noise@0.05")(grey, generator=torch.Generator().manual_seed(1))
    assert abs(float((noisy - grey).std()) - 0.05) < 0.003
    both = compose(parse_attack("brightness@1.5"), parse_attack("contrast@0.5"))(x)
    assert torch.allclose(both, parse_attack("contrast@0.5")(parse_attack("brightness@1.5")(x)))
    with pytest.raises(ValueError, match="unknown attack"):
        parse_attack("blurr")


def test_core_ddim_on_unet_field_matches_diffusers():
    from diffusers import DDIMScheduler

    torch.manual_seed(0)
    unet = tiny_unet(8, base_channels=8).double().eval()
    sched = DDIMScheduler(
        beta_schedule="linear", set_alpha_to_one=False, timestep_spacing="trailing", clip_sample=False
    )
    field = UNetField(unet, schedule=DiscreteVP.from_diffusers(sched))
    steps = 10
    sched.set_timesteps(steps)
    # the kit's grid is diffusers' "trailing" spacing, ending at timestep 0
    assert torch.allclose(
        field.schedule.timestep_of(trailing(field.schedule, steps)[:-1]), sched.timesteps.double(), atol=1e-6
    )
    x_t = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ours = generate(field, x_t, steps=steps, method="ddim")
    ref = x_t
    with torch.no_grad():
        for k in sched.timesteps:
            ref = sched.step(unet(ref, k).sample, k, ref).prev_sample
    assert torch.allclose(ours, ref, atol=1e-5)
    back = invert_to_noise(field, ours, steps=steps)  # naive DDIM inversion: shapes and finiteness only here
    assert back.shape == x_t.shape and bool(torch.isfinite(back).all())


@pytest.mark.parametrize("steps", [10, 20])
def test_core_dpmpp_2m_on_unet_field_matches_diffusers(steps):
    """The core's DPM-Solver++(2M) on the kit's grid is diffusers' DPMSolverMultistepScheduler (trailing spacing,
    final sigma = sigma at timestep 0). diffusers lowers the last step to first order below 15 steps only."""
    from diffusers import DPMSolverMultistepScheduler

    from flowlab.core.solvers.diffusion import sample_diffusion

    torch.manual_seed(0)
    unet = tiny_unet(8, base_channels=8).double().eval()
    sched = DPMSolverMultistepScheduler(
        beta_schedule="linear", timestep_spacing="trailing", algorithm_type="dpmsolver++", solver_order=2,
        final_sigmas_type="sigma_min", lower_order_final=True,
    )  # fmt: skip
    field = UNetField(unet, schedule=DiscreteVP.from_diffusers(sched))
    sched.set_timesteps(steps)
    x_t = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.inference_mode():
        grid = trailing(field.schedule, steps)
        ours = sample_diffusion(field, x_t, grid, schedule=field.schedule, prediction=field.prediction,
                                method="dpmpp_2m", lower_order_final=steps < 15)  # fmt: skip
    ref = x_t
    with torch.no_grad():
        for k in sched.timesteps:
            ref = sched.step(unet(ref, k).sample, k, ref).prev_sample
    # diffusers keeps its sigmas in float32: agreement to ~1e-7 relative to the sample's scale
    assert float((ours - ref).abs().max()) < 1e-6 * float(ref.abs().max())


@pytest.mark.parametrize("arch", ["unet", "dit"])
def test_train_digits_denoiser_learns(arch):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        images = load_digits_images(8, split="train").x[:512]
        field = train_digits_denoiser(images, steps=80, batch_size=64, lr=3e-3, seed=0, base_channels=8, arch=arch)
        assert isinstance(field, DiTField if arch == "dit" else UNetField)
        torch.manual_seed(0)
        untrained = DiTField(tiny_dit(8, dim=16), schedule=field.schedule) if arch == "dit" else UNetField(
            tiny_unet(8, base_channels=8), schedule=field.schedule
        )  # fmt: skip
        held_out = load_digits_images(8, split="test").x[:256]
        with torch.no_grad():
            trained_loss = ddpm_loss(field, held_out, field.schedule, generator=torch.Generator().manual_seed(1))
            start_loss = ddpm_loss(untrained, held_out, field.schedule, generator=torch.Generator().manual_seed(1))
        assert float(trained_loss) < 0.7 * float(start_loss)
    finally:
        torch.set_num_threads(threads)
    with pytest.raises(ValueError, match="arch"):
        train_digits_denoiser(images, arch="vit")


def test_digits_teacher_is_built_once_then_loaded_from_the_cache(tmp_path, monkeypatch):
    """The shared teacher artifact: the first call trains (the same weights as training directly on the artifact's
    two threads), the second reads the checked cache entry; a new setting is a new entry beside it."""
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path))
    config = DigitsDenoiserConfig(size=8, steps=6, batch_size=16, base_channels=8)
    assert not is_cached(digits_denoiser_artifact(config))
    field = digits_denoiser(config)
    assert is_cached(digits_denoiser_artifact(config))
    again = digits_denoiser(config)
    images = load_digits_images(8, split="train").x
    assert digits_denoiser_artifact(config).threads == 2
    with torch_threads(2):
        direct = train_digits_denoiser(images, steps=6, batch_size=16, base_channels=8)
    x = torch.randn(2, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    a, b, c = generate(field, x, steps=3), generate(again, x, steps=3), generate(direct, x, steps=3)
    assert torch.equal(a, b) and torch.equal(a, c) and bool(torch.isfinite(invert_to_noise(field, a, steps=3)).all())
    digits_denoiser(replace(config, seed=1))
    assert len(list((tmp_path / "artifacts" / "vision.digits_denoiser").glob("*/manifest.json"))) == 2
    with pytest.raises(ValueError, match="arch"):
        DigitsDenoiserConfig(arch="vit")


def test_fit_with_ema_schedules_and_their_misuse():
    from flowlab.vision_gen.kit.train import fit_with_ema

    net = torch.nn.Linear(2, 1)
    groups = [{"params": [net.weight], "lr": 0.1}, {"params": [net.bias], "lr": 0.0}]
    bias, weight = net.bias.detach().clone(), net.weight.detach().clone()

    def loss_fn(model, batch, generator):
        return model(batch).square().mean(), {}

    fit_with_ema(net, loss_fn, lambda step, g: torch.ones(4, 2), steps=8, lr=0.1, ema_decay=None,
                 schedule="warmup_cosine", param_groups=groups, device="cpu", generator=torch.Generator())  # fmt: skip
    # each group keeps its own lr under the schedule: the group at lr 0 stays put
    assert torch.equal(net.bias, bias) and not torch.equal(net.weight, weight)
    for steps in (1, 19, 20, 21):  # one-cycle at every short length (20: torch's pct_start * steps = 1 corner)
        fit_with_ema(net, loss_fn, lambda step, g: torch.ones(4, 2), steps=steps, lr=0.1, device="cpu",
                     generator=torch.Generator())  # fmt: skip
        assert bool(torch.isfinite(net.weight).all())
    with pytest.raises(ValueError, match="schedule"):
        fit_with_ema(net, loss_fn, None, steps=1, lr=0.1, schedule="step", device="cpu", generator=torch.Generator())
    with pytest.raises(ValueError, match="param_groups"):
        fit_with_ema(net, loss_fn, None, steps=1, lr=0.1, param_groups=groups, device="cpu",
                     generator=torch.Generator())  # fmt: skip
