"""On a CUDA device (skipped without one): the kit's sampler and inversion on the tiny UNet agree with CPU, and a
Spherical watermark embedded and extracted there decodes its message; a pi-Flow student distils a few steps and
samples there, matching its CPU samples."""

from __future__ import annotations

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
