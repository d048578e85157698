"""ECT's ECM loss: its pairing r(t), the r = 0 branch, zero at the exact map with an exact teacher (consistency
distillation), shared dropout masks in the two passes, the gradient stop, and its input checks."""

import math

import pytest
import torch
from torch import nn

from flowlab.core.losses import ecm_loss, ecm_target_level, heun_level_step

F64 = torch.float64
MU, S = 0.3, 0.6


def _exact_map(*, x, sigma):
    """The PF-ODE map of data N(MU, S^2 I) from level sigma to 0."""
    return MU + S / torch.sqrt(S**2 + sigma.reshape(-1, 1) ** 2) * (x - MU)


def _exact_denoiser(*, x, sigma):
    return MU + S**2 / (S**2 + sigma.reshape(-1, 1) ** 2) * (x - MU)


def test_target_level_is_below_t_and_shrinks_with_q_and_stage():
    t = torch.exp(torch.linspace(-6, 5, 200, dtype=F64))
    for q, stage in ((2.0, 0), (2.0, 3), (4096.0, 0)):
        r = ecm_target_level(t, q=q, stage=stage)
        assert bool((r < t).all()) and bool((r >= 0).all())
    # large t: a relative step of 1/q^(stage+1); q = 4096 is the CMT step t/4096
    big = torch.tensor([200.0], dtype=F64)
    assert math.isclose(float(1 - ecm_target_level(big, q=4096.0)[0] / 200.0), 1 / 4096, rel_tol=1e-6)
    assert float(ecm_target_level(big, q=2.0, stage=3)[0]) > float(ecm_target_level(big, q=2.0, stage=0)[0])
    # a step larger than t lands on the data: r = 0
    assert float(ecm_target_level(torch.tensor([0.01]), q=2.0)[0]) == 0.0


def test_r_zero_branch_targets_the_data():
    """With b = 0 and q = 1.5 every r is 0, so the target is y itself: a function returning y has loss 0."""
    y = torch.randn(32, 4, generator=torch.Generator().manual_seed(0), dtype=F64)
    oracle = lambda *, x, sigma: y  # noqa: E731
    loss = ecm_loss(oracle, y, q=1.5, b=0.0, generator=torch.Generator().manual_seed(1))
    assert float(loss) == 0.0


def test_distillation_loss_vanishes_at_the_exact_map():
    """Consistency distillation with the exact Gaussian denoiser as teacher: at the exact flow map the loss is only
    the Heun step's local error (ratio to a perturbed map's loss < 1e-3)."""
    g = torch.Generator().manual_seed(3)
    y = MU + S * torch.randn(512, 4, generator=g, dtype=F64)
    kw = {"q": 1024.0, "c": 0.0, "teacher": _exact_denoiser}
    exact = ecm_loss(_exact_map, y, generator=torch.Generator().manual_seed(4), **kw)

    def inconsistent(*, x, sigma):  # a level-dependent error breaks consistency (a constant factor would not)
        return _exact_map(x=x, sigma=sigma) + 0.05 * (sigma / (1 + sigma)).reshape(-1, 1) * x

    wrong = ecm_loss(inconsistent, y, generator=torch.Generator().manual_seed(4), **kw)
    assert float(exact) < 1e-3 * float(wrong)


def test_heun_level_step_is_exact_on_the_gaussian_ode_to_third_order():
    x = 3.0 * torch.randn(64, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    sigma = torch.full((64,), 3.0, dtype=F64)
    errs = []
    for h in (0.1, 0.05):
        out = heun_level_step(_exact_denoiser, x, sigma, sigma - h)
        target = MU + math.sqrt((S**2 + (3.0 - h) ** 2) / (S**2 + 9.0)) * (x - MU)
        errs.append(float((out - target).abs().max()))
    assert errs[1] < errs[0] / 6  # local error O(h^3): ratio 8
    denoised = heun_level_step(_exact_denoiser, x, sigma, torch.zeros(64, dtype=F64))
    torch.testing.assert_close(denoised, _exact_denoiser(x=x, sigma=sigma))


class _DropoutMap(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4, dtype=F64)
        self.drop = nn.Dropout(0.5)

    def forward(self, *, x, sigma):
        return self.drop(self.lin(x)) * (1 + 0.0 * sigma.reshape(-1, 1))


def test_both_passes_share_the_dropout_mask_and_only_the_student_pass_has_a_gradient():
    """With q huge, r is t to 1e-8, so the two passes differ only by their masks: shared masks give a loss of order
    |df/dsigma| (tiny here), different ones of order 1e8."""
    torch.manual_seed(0)
    net = _DropoutMap().train()
    y = torch.randn(64, 4, generator=torch.Generator().manual_seed(6), dtype=F64)
    loss = ecm_loss(net, y, q=1e8, generator=torch.Generator().manual_seed(7))
    assert float(loss.detach()) < 1e3
    loss.backward()
    assert net.lin.weight.grad is not None and bool(torch.isfinite(net.lin.weight.grad).all())


def test_bad_inputs_name_the_argument():
    y = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="q: expected a finite number > 1"):
        ecm_loss(_exact_map, y, q=1.0)
    with pytest.raises(ValueError, match="stage"):
        ecm_loss(_exact_map, y, q=2.0, stage=-1)
    with pytest.raises(ValueError, match="teacher"):
        ecm_loss(_exact_map, y, q=2.0, teacher="edm")
    with pytest.raises(ValueError, match="x_1"):
        ecm_loss(_exact_map, torch.full((4, 2), math.nan), q=2.0)
