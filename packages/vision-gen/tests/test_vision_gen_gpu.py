"""On a CUDA device (skipped without one): the kit's sampler and inversion on the tiny UNet agree with CPU, and a
Spherical watermark embedded and extracted there decodes its message; a pi-Flow student distils a few steps and
samples there, matching its CPU samples; SFBD-OMNI and its baselines train and sample there; CMT mid- and
post-trains there."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from flowlab.core.schedules import DiscreteVP
from flowlab.vision_gen.kit import UNetField, generate, invert_to_noise, tiny_unet
from flowlab.vision_gen.watermark.spherical import SphericalConfig, SphericalWatermark

pytestmark = pytest.mark.gpu


def test_generation_and_inversion_on_cuda_match_cpu():
    torch.manual_seed(0)
    field = UNetField(tiny_unet(8, base_channels=8), schedule=DiscreteVP.linear()).eval()
    x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    cpu = generate(field, x, steps=8)
    cuda = generate(field.to("cuda"), x.to("cuda"), steps=8)
    assert cuda.device.type == "cuda" and bool(torch.isfinite(cuda).all())
    # float32 convolutions differ between the two backends by rounding (TF32 off by default for convs in torch)
    assert float((cuda.cpu() - cpu).abs().max()) < 1e-3 * (1 + float(cpu.abs().max()))
    back = invert_to_noise(field, cuda, steps=8)
    assert back.shape == x.shape and bool(torch.isfinite(back).all())


def test_spherical_watermark_round_trip_on_cuda():
    wm = SphericalWatermark.from_seed(SphericalConfig.digits16(), 0)
    g = torch.Generator().manual_seed(0)
    msgs = torch.randint(0, 2, (16, 32), generator=g)
    latents = wm.embed(msgs, generator=g).to("cuda")
    assert float(wm.extract(latents).bit_accuracy(msgs.to("cuda")).float().mean()) == 1.0


def test_pi_flow_distils_and_samples_on_cuda_like_on_cpu():
    from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig
    from flowlab.vision_gen.pi_flow import PiFlowConfig, digits_student, distill, sample_piflow

    teacher = DigitsTeacher(TeacherConfig(dim=16, depth=1)).eval().requires_grad_(False)
    config = PiFlowConfig(steps=3, batch_size=8, substeps_per_unit=8)
    x_1, y = torch.rand(64, 1, 8, 8) * 2 - 1, torch.arange(64) % 10

    def batches(step, g):
        i = torch.randint(0, 64, (8,), generator=g)
        return x_1[i], {"y": y[i]}

    cuda_teacher = DigitsTeacher(teacher.config).to("cuda").eval().requires_grad_(False)
    cuda_teacher.load_state_dict(teacher.state_dict())
    student = distill(config, digits_student(config, cuda_teacher), cuda_teacher.velocity(), batches, device="cuda")
    z = torch.randn(10, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    cuda = sample_piflow(student, z.to("cuda"), nfe=2, substeps_per_unit=8, y=torch.arange(10, device="cuda"))
    cpu = sample_piflow(student.cpu(), z, nfe=2, substeps_per_unit=8, y=torch.arange(10))
    assert cuda.device.type == "cuda" and bool(torch.isfinite(cuda).all())
    assert float((cuda.cpu() - cpu).abs().max()) < 1e-3 * (1 + float(cpu.abs().max()))


def test_sfbd_omni_rounds_and_baselines_run_on_cuda():
    """SFBD-OMNI (offline and online), SFBD and ambient-lite train and sample on CUDA with CPU generators; the
    reconstructions are finite, shaped like the data and come back to the CPU."""
    from flowlab.vision_gen.kit.corruptions import GaussianNoise, PixelMask
    from flowlab.vision_gen.sfbd_omni import SFBDConfig, ambient_lite, ambient_sample, sfbd_gaussian, sfbd_omni

    g = torch.Generator().manual_seed(0)
    clean, truth = torch.rand(8, 1, 8, 8, generator=g) * 2 - 1, torch.rand(40, 1, 8, 8, generator=g) * 2 - 1
    cfg = SFBDConfig(rounds=2, pretrain_steps=3, steps_per_round=3, batch_size=16, hidden=(32,), sampler_steps=4)
    for corruption in (GaussianNoise(0.3), PixelMask(0.5)):
        y = corruption.sample(truth, generator=g)
        for config in (cfg, replace(cfg, online_gamma=0.5)):
            out = sfbd_omni(y, clean, corruption, config, device="cuda")
            assert next(out.model.parameters()).device.type == "cuda"
            assert all(p.device.type == "cpu" and p.shape == truth.shape and bool(torch.isfinite(p).all())
                       for p in out.pools)  # fmt: skip
    noisy = GaussianNoise(0.3).sample(truth, generator=g)
    assert sfbd_gaussian(noisy, clean, GaussianNoise(0.3), cfg, device="cuda").pools[-1].shape == truth.shape
    masked = PixelMask(0.5).sample(truth, generator=g)
    net = ambient_lite(masked, PixelMask(0.5), cfg, device="cuda")
    assert ambient_sample(net, 10, PixelMask(0.5), steps=4, device="cuda").shape == (10, 1, 8, 8)


def test_cmt_mid_and_post_training_run_on_cuda():
    """CMT mid-training (both branches), ECT / CD / MeanFlow post-training, few-step sampling and the gradient bias on
    CUDA, finite everywhere."""
    from flowlab.vision_gen.cmt import (
        MidConfig,
        PostConfig,
        consistency_student,
        few_step_samples,
        gradient_bias,
        meanflow_student,
        mid_train,
        post_train,
    )
    from flowlab.vision_gen.kit.data import load_digits_images
    from flowlab.vision_gen.kit.teachers import DigitsTeacher, TeacherConfig

    teacher = DigitsTeacher(TeacherConfig(family="edm", dim=16, depth=1, steps=4, batch_size=16)).to("cuda").eval()
    data = load_digits_images(8, split="train")
    noise, labels = torch.randn(8, 1, 8, 8, device="cuda"), torch.arange(8, device="cuda")
    for branch in ("consistency", "meanflow"):
        mid = mid_train(teacher, MidConfig(branch=branch, steps=2, batch_size=32, nfe=4), device="cuda").student
        x = few_step_samples(mid, labels, steps=2, noise=noise)
        assert x.device.type == "cuda" and bool(torch.isfinite(x).all())
    for method in ("ect", "cd", "meanflow"):
        make = meanflow_student if method == "meanflow" else consistency_student
        student = make(teacher, init="diffusion").to("cuda")
        out = post_train(student, PostConfig(method=method, steps=2, batch_size=8), data.x, data.y, teacher=teacher,
                         device="cuda").student  # fmt: skip
        assert all(bool(torch.isfinite(p).all()) for p in out.parameters())
    student = consistency_student(teacher, init="diffusion").to("cuda")
    bias = gradient_bias(student, teacher.denoiser(), data.x.cuda(), data.y.cuda(), PostConfig(), batch_size=8,
                         batches=1, oracle_steps=4)  # fmt: skip
    assert bias.bias >= 0 and abs(bias.cosine) <= 1 + 1e-6


def test_gendr_pix_trains_restores_and_profiles_on_cuda_like_on_cpu():
    """Every GenDR-Pix stage trains a few steps on CUDA; the student's restoration (single, ensemble, tiled) there
    matches the same weights on the CPU, and its CUDA peak memory (torch.cuda.max_memory_allocated) is below the
    teacher's."""
    from flowlab.vision_gen.gendr_pix.data import sr_pairs
    from flowlab.vision_gen.gendr_pix.evaluate import cost_profile
    from flowlab.vision_gen.gendr_pix.model import GenDRConfig
    from flowlab.vision_gen.gendr_pix.sample import restore, upscale
    from flowlab.vision_gen.gendr_pix.train import distill_stage1, distill_stage2, train_teacher
    from flowlab.vision_gen.kit.autoencoder import AutoencoderConfig, TinyAutoencoder

    ae_config = AutoencoderConfig(size=16, in_channels=3, channels=(4, 8, 8), dataset="photos", steps=2)
    config = GenDRConfig(autoencoder=ae_config, width=8, blocks=1, crop=16, pairs=32, batch_size=4, teacher_steps=3,
                         stage1_steps=3, stage2_steps=3)  # fmt: skip
    pairs = sr_pairs("train", 16, 32, config.degradation, seed=0)
    torch.manual_seed(0)
    ae = TinyAutoencoder(ae_config).eval().requires_grad_(False)
    teacher = train_teacher(ae, pairs, config, device="cuda")
    student = distill_stage2(distill_stage1(teacher, pairs, config, device="cuda"), teacher, pairs, config,
                             device="cuda")  # fmt: skip
    assert next(student.parameters()).device.type == "cuda"
    x = torch.rand(2, 3, 36, 44, generator=torch.Generator().manual_seed(0)) * 2 - 1
    for mode in ("single", "ensemble"):
        cuda = restore(student, x.cuda(), factor=4, mode=mode)
        cpu = restore(copy.deepcopy(student).cpu(), x, factor=4, mode=mode)
        assert cuda.shape == x.shape and bool(torch.isfinite(cuda).all())
        assert float((cuda.cpu() - cpu).abs().max()) < 1e-3
    lq = torch.rand(1, 3, 24, 20, generator=torch.Generator().manual_seed(1)) * 2 - 1
    whole = upscale(student, lq.cuda(), scale=4, factor=4)
    tiles = upscale(student, lq.cuda(), scale=4, factor=4, tile=48, overlap=16)
    assert tiles.shape == whole.shape == (1, 3, 96, 80)
    assert float((tiles - whole).abs().max()) < 0.2  # the nets see a different border, not a different image
    cost = cost_profile({"teacher": teacher, "student": student}, (64,), device="cuda", repeats=1, factor=4)
    assert 0 < cost["student"][64]["bytes"] < cost["teacher"][64]["bytes"]
