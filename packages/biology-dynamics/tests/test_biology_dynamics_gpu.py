"""On CUDA (skipped without a CUDA device): WFR-FM's tiny fit on the GPU and its weighted-particle sampler against
the same fields on the CPU; the Wright-Fisher domains and baselines with CUDA tensors and the CPU generator the bench
runner hands them, against the same calls on the CPU (every draw is made on the generator's device, so the two runs
draw the same numbers and differ only by the devices' rounding)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from flowlab.biology_dynamics.wfr_fm.evaluate import evaluate_time_points
from flowlab.biology_dynamics.wfr_fm.generators import branching_toggle_switch
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.sample import simulate_particles
from flowlab.biology_dynamics.wright_fisher.ancestral import sample_lineages, simulate_lineages
from flowlab.biology_dynamics.wright_fisher.baselines import DDSMLite, DirichletFM, LinearSimplexFM
from flowlab.biology_dynamics.wright_fisher.discrete import DiscreteDomain
from flowlab.biology_dynamics.wright_fisher.nets import SequenceMLP
from flowlab.biology_dynamics.wright_fisher.process import WrightFisherPath
from flowlab.biology_dynamics.wright_fisher.table import lineage_table
from flowlab.biology_dynamics.wright_fisher.unified import domain


@pytest.mark.gpu
def test_wfr_fm_fits_and_samples_on_cuda_as_on_the_cpu():
    cuda = torch.device("cuda")
    adata = branching_toggle_switch(60, times=(0.0, 1.0, 2.0), generator=torch.Generator().manual_seed(0))
    config = WFRConfig(delta=1.5, v_hidden=(32, 32), g_hidden=(32,), iters=50, batch=64, plan_iters=100)
    model = WFRFlowMatching(config).fit(adata, device=cuda, generator=torch.Generator(cuda).manual_seed(0))
    assert next(model.fields.parameters()).device.type == "cuda"
    rows = evaluate_time_points(model, adata)  # t = 1, 2
    assert len(rows) == 2 and all(np.isfinite([r.w1, r.tmv]).all() for r in rows)
    # the population grows 1.9x and 3.3x: without growth the mean total-mass error would be 0.58 (CPU fit: 0.10)
    assert np.mean([r.tmv for r in rows]) < 0.3

    x0 = torch.as_tensor(adata.obsm["X_emb"][adata.obs["time"].to_numpy() == 0.0], dtype=torch.float32)
    tau = torch.tensor([0.0, 0.5, 1.0])
    with torch.no_grad():
        on_gpu = simulate_particles(model.fields, x0.to(cuda), tau.to(cuda))
        on_cpu = simulate_particles(copy.deepcopy(model.fields).cpu(), x0, tau)
    assert on_gpu.x.shape == (3, x0.shape[0], 2) and on_gpu.log_w.shape == (3, x0.shape[0])
    assert torch.isfinite(on_gpu.x).all() and torch.isfinite(on_gpu.log_w).all()
    # float32 dopri5 at rtol 1e-5: the devices' round-off may pick slightly different steps, well inside 1e-3
    torch.testing.assert_close(on_gpu.x.cpu(), on_cpu.x, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(on_gpu.log_w.cpu(), on_cpu.log_w, atol=1e-3, rtol=1e-3)
    assert abs(on_gpu.log_w[0]).max() == 0  # every particle starts with unit mass


#: the Wright-Fisher methods checked on CUDA: name -> (a maker of a fresh method, the network's input channels)
WRIGHT_FISHER_METHODS = {
    "simplicial": (lambda: domain("simplicial", 4), 4),
    "discrete": (lambda: domain("discrete", 4), 4),
    "masked": (lambda: DiscreteDomain(4, kind="masked"), 5),
    "gaussian": (lambda: domain("gaussian", 4), 4),
    "unified-simplicial": (lambda: domain("simplicial", 4, ssp=True), 4),
    "dirichlet-fm": (lambda: DirichletFM(4), 4),
    "linear-fm": (lambda: LinearSimplexFM(4), 4),
    "ddsm-lite": (lambda: DDSMLite(4, times=8, sim_steps=100, bank=64), 4),
}


def _wright_fisher_run(name: str, device: str) -> dict[str, torch.Tensor]:
    """One loss, negative ELBO (where the method has one) and 64 samples of `name` with tensors and the network on
    `device`, each call with a fresh seeded CPU generator: {"loss": (), "nats": (), "letters": (64, 3)} on the CPU."""
    make, channels = WRIGHT_FISHER_METHODS[name]
    method = make()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = SequenceMLP(3, 4, channels=channels, hidden=(32,), times=not name.startswith("unified")).to(device)
    x_0 = torch.randint(4, (32, 3), generator=torch.Generator().manual_seed(0)).to(device)
    out = {"loss": method.loss_fn(net, x_0, torch.Generator().manual_seed(1))[0].detach()}
    if hasattr(method, "elbo"):
        out["nats"] = torch.tensor(method.elbo(net, x_0, generator=torch.Generator().manual_seed(2), draws=2)["nats"])
    letters = method.sample(net, 64, 3, steps=10, generator=torch.Generator().manual_seed(3), device=device)
    assert letters.device.type == torch.device(device).type and letters.shape == (64, 3)
    out["letters"] = letters
    return {key: value.cpu() for key, value in out.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(WRIGHT_FISHER_METHODS))
def test_wright_fisher_methods_on_cuda_with_a_cpu_generator_match_the_cpu(name):
    """Loss, ELBO and samples with CUDA tensors and a CPU generator equal the CPU run's: the losses and ELBOs to
    1e-4 relative (the network runs in float32 on two devices), the letters in at least 95% of the 192 positions
    (a draw near a category boundary may flip; samples from another seed agree on 20-28% on the CPU)."""
    on_cpu, on_cuda = _wright_fisher_run(name, "cpu"), _wright_fisher_run(name, "cuda")
    assert on_cpu.keys() == on_cuda.keys()
    for key in on_cpu.keys() - {"letters"}:
        torch.testing.assert_close(on_cuda[key], on_cpu[key], rtol=1e-4, atol=1e-6, msg=f"{name}: {key}")
    agree = float((on_cuda["letters"] == on_cpu["letters"]).float().mean())
    assert agree >= 0.95, (name, agree)


@pytest.mark.gpu
def test_wright_fisher_lineage_draws_on_cuda_with_a_cpu_generator_match_the_cpu():
    """The forward process's draws with CUDA inputs and a CPU generator: the lineage counts (series and Griffiths
    ranges), the death process and the table's inverse-CDF draws equal the CPU's exactly, and the exact forward
    draws x_t to 1e-12."""
    cuda = torch.device("cuda")
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    tau = torch.tensor([0.02, 0.05, 0.2, 0.5, 1.0, 2.0], dtype=torch.float64)
    start = torch.tensor([3, 10, 40, 0])
    table = lineage_table(4.0, 0.01, 5.0)
    q = table.probs(tau)
    draws = {
        "sample_lineages": lambda device: sample_lineages(tau.to(device), 4.0, generator=g()),
        "simulate_lineages": lambda device: simulate_lineages(start.to(device), 0.3, 4.0, generator=g()),
        "table.sample": lambda device: table.sample(q.to(device), generator=g(), per_row=50),
    }
    for name, draw in draws.items():
        on_cuda = draw(cuda)
        assert on_cuda.device.type == "cuda" and torch.equal(on_cuda.cpu(), draw("cpu")), name
    path, x_0 = WrightFisherPath(4), torch.randint(4, (6, 5), generator=g())
    t = torch.linspace(0.1, 0.99, 6, dtype=torch.float64)
    on_cuda = path.sample(x_0.to(cuda), t.to(cuda), generator=g())
    assert on_cuda.device.type == "cuda"
    torch.testing.assert_close(on_cuda.cpu(), path.sample(x_0, t, generator=g()), rtol=0, atol=1e-12)
