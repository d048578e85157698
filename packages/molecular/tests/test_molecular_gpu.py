"""WT-ASBS on CUDA (skipped without a CUDA device): the four-well sampler's base process on the GPU, a tiny
curriculum there, and its path-weighted Delta F against quadrature and against the same networks sampled on the CPU."""

from __future__ import annotations

import math

import pytest
import torch

from flowlab.core.grids import uniform
from flowlab.molecular.wt_asbs.analysis import delta_f_from_pmf, delta_f_from_samples, pmf_quadrature
from flowlab.molecular.wt_asbs.asbs import ASBS
from flowlab.molecular.wt_asbs.benchmarks.toy import TOY_SMOKE
from flowlab.molecular.wt_asbs.potentials import FourWell
from flowlab.molecular.wt_asbs.toys import TOY_INTERVALS, toy_bias, toy_cvs, toy_source_mean

N = 10_000


def _four_well_sampler(device: torch.device) -> ASBS:
    """WT-ASBS on the four-well with the smoke curriculum (AC, 2 + 1 epochs of 5 steps), all on `device`."""
    pot, cfg = FourWell(), TOY_SMOKE.sampler_for("four-well")
    return ASBS(
        pot, cfg.noise(), cfg.asbs, source_std=cfg.source_std, source_mean=toy_source_mean(pot), cvs=toy_cvs(pot),
        bias=toy_bias(pot, cfg.bias), device=device, generator=torch.Generator(device).manual_seed(0),
    )  # fmt: skip


def _weighted_delta_f(model: ASBS) -> float:
    """Delta F (kT) between the four-well's x < 0 and x > 0 halves from N path-weighted samples of `model`."""
    _, x1, log_w = model.sample_weighted(N)
    assert x1.shape == (N, 2) and x1.device.type == model.device.type and torch.isfinite(x1).all()
    assert torch.isfinite(log_w).float().mean() > 0.99
    a, b = TOY_INTERVALS["four-well"]
    return delta_f_from_samples(x1[:, 0].cpu(), a, b, weights=torch.softmax(log_w, 0).cpu())


def _exact_delta_f() -> float:
    """The four-well's Delta F between the halves by quadrature of its PMF along x."""
    pot = FourWell()
    (lo, hi), _ = pot.box
    centres = torch.linspace(lo, hi, 401, dtype=torch.float64)
    a, b = TOY_INTERVALS["four-well"]
    return delta_f_from_pmf(pmf_quadrature(pot.energy, pot.box, centres), centres, a, b)


@pytest.mark.gpu
def test_wt_asbs_trains_and_samples_on_cuda_and_its_weights_agree_with_the_cpu():
    cuda = torch.device("cuda")
    model = _four_well_sampler(cuda)
    # untrained (zero control), X_1 - X_0 is the Euler-Maruyama chain's noise: N(0, sum_k g_k^2 h_k) per coordinate
    x0, x1 = model.sample(N)
    assert x0.device.type == "cuda" and x1.shape == (N, 2)
    t = uniform(model.config.sde_steps, dtype=torch.float64)
    var = float((model.noise.g(t[:-1]) ** 2 * t.diff()).sum())
    d = (x1 - x0).double()
    # 5 standard errors: of the mean sqrt(var / N), of the variance var sqrt(2 / N) (1.4 %)
    assert d.mean(0).abs().max() < 5 * math.sqrt(var / N)
    torch.testing.assert_close(d.var(0), torch.full((2,), var, dtype=torch.float64, device=cuda), rtol=0.07, atol=0)

    log = model.train()
    assert all(math.isfinite(v) for v in log.loss) and log.hills[-1] > 0
    assert next(model.controller.parameters()).device.type == "cuda"
    # the same trained networks sampled on the CPU: path weights correct whatever the sampler learnt, so both
    # estimates match quadrature; with 10k samples (ESS a few %) they spread by about 0.1 kT (0.5 kT: the claim)
    on_cpu = _four_well_sampler(torch.device("cpu"))
    on_cpu.controller.load_state_dict(model.controller.state_dict())
    on_cpu.corrector.load_state_dict(model.corrector.state_dict())
    exact, gpu, cpu = _exact_delta_f(), _weighted_delta_f(model), _weighted_delta_f(on_cpu)
    assert abs(gpu - exact) < 0.5 and abs(cpu - exact) < 0.5 and abs(gpu - cpu) < 0.5, (gpu, cpu, exact)
