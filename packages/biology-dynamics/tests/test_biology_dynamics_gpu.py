"""WFR-FM on CUDA (skipped without a CUDA device): a tiny fit on the GPU, and its weighted-particle sampler against the
same fields on the CPU."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from flowlab.biology_dynamics.wfr_fm.evaluate import evaluate_time_points
from flowlab.biology_dynamics.wfr_fm.generators import branching_toggle_switch
from flowlab.biology_dynamics.wfr_fm.model import WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.sample import simulate_particles


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
