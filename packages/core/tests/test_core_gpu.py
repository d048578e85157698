"""The core's sampler and likelihood on CUDA (the `gpu` mark: skipped without a CUDA device): `solve_ode` and
`log_likelihood` on the exact 8-Gaussian CondOT field agree with the same float64 run on the CPU, and the likelihood
with the mixture's closed-form log-density."""

from __future__ import annotations

import pytest
import torch

from flowlab.core import grids
from flowlab.core.distributions import StandardNormal, multinomial_counts, randn
from flowlab.core.likelihood import log_likelihood
from flowlab.core.schedules import CondOT
from flowlab.core.solvers import solve_ode
from flowlab.core.testing.analytic import GaussianMixture

F64 = torch.float64


def _sample_and_score(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(samples (256, 2), their log-likelihood (256,), the closed-form log-density (256,)) on `device`: 32 rk4 steps
    forward from seeded noise (drawn on the CPU, so every device starts from the same points), 32 back."""
    mixture = GaussianMixture.ring(8, radius=3.0, std=0.6, schedule=CondOT(), dtype=F64).to(device, F64)
    x0 = randn((256, 2), generator=torch.Generator().manual_seed(0), dtype=F64).to(device)
    grid = grids.uniform(32, dtype=F64, device=device)
    x1 = solve_ode(mixture.velocity, x0, grid, method="rk4")
    res = log_likelihood(mixture.velocity, x1, source=StandardNormal((2,)), grid=grid.flip(0), method="rk4")
    return x1, res.log_prob, mixture.log_prob(x1, torch.ones(len(x1), dtype=F64, device=device))


@pytest.mark.gpu
def test_sampler_and_likelihood_on_cuda_match_the_cpu_and_the_closed_form():
    x_gpu, logp_gpu, truth_gpu = _sample_and_score(torch.device("cuda"))
    x_cpu, logp_cpu, _ = _sample_and_score(torch.device("cpu"))
    assert x_gpu.device.type == "cuda" and x_gpu.shape == (256, 2) and logp_gpu.shape == (256,)
    assert bool(torch.isfinite(x_gpu).all()) and bool(torch.isfinite(logp_gpu).all())
    # float64 on both devices: only the kernels' rounding differs, over 2 x 32 rk4 steps
    torch.testing.assert_close(x_gpu.cpu(), x_cpu, atol=1e-10, rtol=0)
    torch.testing.assert_close(logp_gpu.cpu(), logp_cpu, atol=1e-10, rtol=0)
    # exact divergence on the exact field: 32 rk4 steps leave far less than 1e-3 nats (the core's closed-form tolerance)
    torch.testing.assert_close(logp_gpu, truth_gpu, atol=1e-3, rtol=0)


@pytest.mark.gpu
def test_ancestral_ddpm_sampling_on_cuda_takes_a_cpu_generator_and_matches_the_cpu():
    """The "ddpm" sampler's fresh noise is drawn on the generator's device, so a CPU generator drives a CUDA run with
    the CPU run's numbers (float64: the devices differ by round-off only)."""
    from flowlab.core.schedules import DiscreteVP
    from flowlab.core.solvers import sample_diffusion

    schedule = DiscreteVP.linear(1000)

    def run(device: torch.device) -> torch.Tensor:
        x0 = randn((64, 2), generator=torch.Generator().manual_seed(0), dtype=F64).to(device)
        return sample_diffusion(
            lambda *, x, t: 0.5 * x,
            x0,
            grids.trailing(schedule, 20, device=device),
            schedule=schedule,
            prediction="epsilon",
            method="ddpm",
            generator=torch.Generator().manual_seed(1),
        )

    torch.testing.assert_close(run(torch.device("cuda")).cpu(), run(torch.device("cpu")), atol=1e-10, rtol=0)


@pytest.mark.gpu
def test_a_cpu_generator_drives_every_random_draw_of_a_cuda_run_with_the_cpu_numbers():
    """The core scenarios' CUDA runs seed everything with CPU generators: each draw is made on the generator's device
    and moved, so the CUDA result equals the CPU one (and the mixture density takes points on any device)."""
    from flowlab.core.gfm.data import random_torus_mixture
    from flowlab.core.manifolds import FlatTorus
    from flowlab.core.metrics import sliced_wasserstein

    def seeded() -> torch.Generator:
        return torch.Generator().manual_seed(0)

    mixture = GaussianMixture.ring(8, radius=3.0, std=0.6, schedule=CondOT(), dtype=F64)
    cpu, cuda = mixture.sample_data(64, generator=seeded()), mixture.to("cuda", F64).sample_data(64, generator=seeded())
    assert cuda.device.type == "cuda" and torch.equal(cuda.cpu(), cpu)
    x, y = cpu, cpu.flip(0) + 1
    sw = sliced_wasserstein(x, y, num_projections=16, generator=seeded())
    sw_cuda = sliced_wasserstein(x.cuda(), y.cuda(), num_projections=16, generator=seeded())
    torch.testing.assert_close(sw_cuda.cpu(), sw, atol=1e-12, rtol=0)
    torus = FlatTorus(2)
    assert torch.equal(
        torus.random_base(8, generator=seeded(), device="cuda").cpu(), torus.random_base(8, generator=seeded())
    )
    density = random_torus_mixture(2, components=3, scale=0.3, generator=seeded())
    points = density.sample(32, generator=seeded())
    torch.testing.assert_close(density.log_prob(points.cuda()).cpu(), density.log_prob(points))


@pytest.mark.gpu
def test_likelihood_under_inference_mode_on_cuda_keeps_its_divergence():
    """torch 2.11 on an H200 returned zero vjps under inference mode (every NLL lost its divergence, pytorch#177318):
    the likelihood under inference mode on CUDA equals the closed form like the plain call."""
    mixture = GaussianMixture.ring(8, radius=3.0, std=0.6, schedule=CondOT(), dtype=F64).to("cuda", F64)
    x = mixture.sample_data(128, generator=torch.Generator().manual_seed(0))
    grid = grids.uniform(32, dtype=F64, device="cuda").flip(0)
    with torch.inference_mode():
        res = log_likelihood(mixture.velocity, x, source=StandardNormal((2,)), grid=grid, method="rk4")
    truth = mixture.log_prob(x, torch.ones(len(x), dtype=F64, device="cuda"))
    assert float((res.log_prob - truth).abs().max()) < 1e-3


@pytest.mark.gpu
def test_unbalanced_sinkhorn_on_cuda_matches_the_cpu():
    """The sparse-kernel unbalanced Sinkhorn on CUDA: the same plan as on the CPU (float32 matvecs on both)."""
    from flowlab.core.unbalanced_sinkhorn import unbalanced_sinkhorn_kl

    g = torch.Generator().manual_seed(0)
    x0, x1 = torch.randn(400, 2, generator=g, dtype=F64), torch.randn(500, 2, generator=g, dtype=F64) + 0.5
    M = -torch.log(torch.cos((torch.cdist(x0, x1) / 4).clamp_max(torch.pi / 2)).square() + 1e-10)
    a, b = torch.ones(400, dtype=F64), torch.ones(500, dtype=F64)
    cpu = unbalanced_sinkhorn_kl(a, b, M, 1.0)
    gpu = unbalanced_sinkhorn_kl(a.cuda(), b.cuda(), M.cuda(), 1.0)
    assert gpu.plan.device.type == "cuda" and gpu.converged and gpu.density < 0.25
    assert float((gpu.plan.cpu() - cpu.plan).abs().max()) < 1e-3 * float(cpu.plan.max())
    assert float(gpu.plan.sum()) == pytest.approx(float(cpu.plan.sum()), rel=1e-4)


@pytest.mark.gpu
def test_multinomial_counts_from_a_cpu_generator_serve_cuda_probabilities_with_the_cpu_draws():
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]], dtype=F64)
    on_cuda = multinomial_counts(probs.cuda(), 40, generator=torch.Generator().manual_seed(2))
    on_cpu = multinomial_counts(probs, 40, generator=torch.Generator().manual_seed(2))
    assert on_cuda.device.type == "cuda" and torch.equal(on_cuda.cpu(), on_cpu)
