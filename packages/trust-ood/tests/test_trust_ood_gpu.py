"""The certificate on CUDA (the `gpu` mark: skipped without a CUDA device): the joint likelihood of Psi's prediction,
from a seeded score model and FNO at toy size, agrees with the same float64 run on the CPU."""

from __future__ import annotations

import pytest
import torch

from flowlab.trust_ood.certificate.evaluate import to_tensors
from flowlab.trust_ood.certificate.joint_model import JointScoreModel
from flowlab.trust_ood.certificate.pde1d import PDEConfig, generate
from flowlab.trust_ood.certificate.regressors import FNO1d
from flowlab.trust_ood.certificate.score import CertificateResult, DensityModels, certificate

N, BATCH = 32, 8


def _certify(device: torch.device) -> CertificateResult:
    """The joint certificate of 8 heat inputs (B, 1, 32) on `device`, in float64 (no TF32 convolutions on CUDA):
    the same seeded weights, data and Hutchinson probes (a CPU generator) on every device, 4 rk4 steps."""
    torch.manual_seed(0)
    joint = JointScoreModel(2, N, sigma=25.0, net_channels=(8, 16), time_dim=32).double().to(device)
    psi = FNO1d(modes=4, width=8, layers=3, dropout=0.1).double().to(device)
    pde = PDEConfig.default("heat", N)
    x, param, _ = to_tensors(generate(pde, "id", BATCH, seed=0), sum(pde.param_range) / 2, device)
    return certificate(DensityModels(joint=joint), psi, x.double(), param.double(), steps=4, num_probes=2,
                       generator=torch.Generator().manual_seed(1))  # fmt: skip


@pytest.mark.gpu
def test_joint_certificate_on_cuda_matches_the_cpu():
    gpu, cpu = _certify(torch.device("cuda")), _certify(torch.device("cpu"))
    assert gpu.score.device.type == "cuda" and gpu.score.shape == (BATCH,) and gpu.prediction.shape == (BATCH, 1, N)
    assert bool(torch.isfinite(gpu.score).all()) and bool(torch.isfinite(gpu.log_prob).all())
    # float64 on both devices: only the kernels' rounding (FFT, convolutions) differs
    torch.testing.assert_close(gpu.prediction.cpu(), cpu.prediction, atol=1e-10, rtol=0)
    torch.testing.assert_close(gpu.log_prob.cpu(), cpu.log_prob, atol=1e-6, rtol=0)  # nats, of about -205
    torch.testing.assert_close(gpu.score.cpu(), cpu.score, atol=1e-7, rtol=0)
