"""The certificate's likelihood chain against closed forms, its variants, calibration, metrics and input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlab.core.likelihood import bits_per_dim
from flowlab.trust_ood.certificate.joint_model import EPS, JointScoreModel, train_score_model
from flowlab.trust_ood.certificate.metrics import acc_fpr_at_threshold, auroc
from flowlab.trust_ood.certificate.score import (
    SPACINGS,
    DensityModels,
    ErrorModel,
    calibrate_threshold,
    certificate,
    likelihood_grid,
)


class GaussianScore(JointScoreModel):
    """The exact VE score of N(m, diag v) data (per element, raw units) after the model's standardisation."""

    def __init__(self, m: torch.Tensor, v: torch.Tensor, *, sigma: float, mean, std) -> None:
        channels, length = m.shape
        super().__init__(channels, length, sigma=sigma, net_channels=(8,), time_dim=8, mean=mean, std=std)
        self.register_buffer("mu_z", (m - self.mean[:, None]) / self.std[:, None])
        self.register_buffer("var_z", v / self.std[:, None] ** 2)

    def forward(self, *, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        s2 = self.schedule(t).sigma.to(x.dtype)[:, None, None] ** 2
        return -(x - self.mu_z.to(x.dtype)) / (self.var_z.to(x.dtype) + s2)


def _exact_log_prob(w: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (-0.5 * (w - m) ** 2 / v - 0.5 * torch.log(2 * math.pi * v)).flatten(1).sum(1)


class Shift(torch.nn.Module):
    """A regressor with a fixed output: Psi(x) = b (whatever x is), so the joint density factorises."""

    def __init__(self, b: torch.Tensor) -> None:
        super().__init__()
        self.b = b

    def forward(self, x: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
        return self.b.expand(x.shape[0], *self.b.shape[1:]).clone()


def _gaussian_setup(length: int, seed: int, dtype=torch.float64):
    """Data N(m, diag v) and its exact scores. sigma = 1e4 makes the VE prior N(0, s(1)^2) match the true marginal
    N(m, v + s(1)^2) at tau = 1 to ~|m| / s(1) ~ 1e-3 nats per dimension (at sigma = 50 the gap is ~0.05: a property
    of the method's prior, not of the integrator)."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(2, length, generator=g, dtype=dtype)
    v = 0.2 + torch.rand(2, length, generator=g, dtype=dtype)
    model = GaussianScore(m, v, sigma=1e4, mean=torch.tensor([0.3, -0.2]), std=torch.tensor([1.5, 0.7])).to(dtype)
    marginal = GaussianScore(m[:1], v[:1], sigma=1e4, mean=torch.tensor([0.3]), std=torch.tensor([1.5])).to(dtype)
    return m, v, model, marginal, g


def test_joint_certificate_reproduces_gaussian_log_density_exact_divergence_2d():
    m, v, joint, _, g = _gaussian_setup(1, 0)
    w = m + v.sqrt() * torch.randn(16, 2, 1, generator=g, dtype=torch.float64)
    x, y = w[:, :1], w[:, 1:]
    res = certificate(DensityModels(joint=joint), Shift(y), x, torch.ones(16, dtype=torch.float64),
                      steps=100, method="rk4", divergence="exact")  # fmt: skip
    exact = _exact_log_prob(torch.cat([x, res.prediction], dim=1), m, v)
    # 1e-3 nats per dimension (D = 2); the data enter at tau = EPS, whose extra variance ~EPS is negligible here
    assert (res.log_prob - exact).abs().max() / 2 < 1e-3
    np.testing.assert_allclose(res.score, -bits_per_dim(res.log_prob, 2), rtol=1e-12)


def test_joint_certificate_reproduces_gaussian_log_density_hutchinson_128d():
    m, v, joint, _, g = _gaussian_setup(64, 1)
    w = m + v.sqrt() * torch.randn(32, 2, 64, generator=g, dtype=torch.float64)
    x = w[:, :1]
    param = torch.ones(32, dtype=torch.float64)
    res = certificate(DensityModels(joint=joint), Shift(w[:, 1:]), x, param, steps=50, num_probes=4,
                      generator=torch.Generator().manual_seed(2))  # fmt: skip
    diff = res.log_prob - _exact_log_prob(torch.cat([x, res.prediction], dim=1), m, v)
    se = diff.std() / math.sqrt(len(diff))
    assert diff.mean().abs() < 3 * se + 1e-3 * 128  # unbiased up to 3 standard errors
    assert diff.abs().max() < 0.05 * 128  # and each estimate is close per dimension


def test_conditional_variant_is_joint_minus_marginal_with_the_same_seed():
    m, v, joint, marginal, g = _gaussian_setup(16, 3)
    w = m + v.sqrt() * torch.randn(8, 2, 16, generator=g, dtype=torch.float64)
    models = DensityModels(joint=joint, input=marginal, output=marginal)
    reg, x, p = Shift(w[:, 1:]), w[:, :1], torch.ones(8, dtype=torch.float64)
    opts = dict(steps=10, num_probes=2)
    cond = certificate(models, reg, x, p, variant="y|x", generator=torch.Generator().manual_seed(7), **opts)
    full = certificate(models, reg, x, p, variant="x&y", generator=torch.Generator().manual_seed(7), **opts)
    inp = certificate(models, reg, x, p, variant="x", generator=torch.Generator().manual_seed(7), **opts)
    torch.testing.assert_close(cond.log_prob, full.log_prob - inp.log_prob)
    # and for Gaussians with independent channels the conditional is the y marginal, here up to Hutchinson noise
    exact_y = _exact_log_prob(w[:, 1:], m[1:], v[1:])
    assert (cond.log_prob - exact_y).abs().mean() < 0.1 * 16


def test_likelihood_grid_spacings_and_schedule_endpoints():
    model = JointScoreModel(1, 8, sigma=50.0, net_channels=(8,), time_dim=8)
    for spacing in SPACINGS:
        grid = likelihood_grid(10, model.schedule, spacing=spacing, dtype=torch.float64)
        assert float(grid[0]) == pytest.approx(1 - EPS) and float(grid[-1]) == 0.0
        assert bool((grid.diff() < 0).all())
    log_s = torch.log(model.schedule(likelihood_grid(10, model.schedule, dtype=torch.float64)).sigma)
    torch.testing.assert_close(log_s.diff(), torch.full((10,), float(log_s.diff().mean()), dtype=torch.float64))
    with pytest.raises(ValueError, match="schedule"):
        likelihood_grid(10)
    with pytest.raises(ValueError, match="spacing"):
        likelihood_grid(10, model.schedule, spacing="cosine")
    ends = model.schedule(torch.tensor([1.0, 0.0], dtype=torch.float64)).sigma
    assert float(ends[0]) == 0.0  # t = 1 (tau = 0) is the data
    assert float(ends[1]) == pytest.approx(math.sqrt((50.0**2 - 1) / (2 * math.log(50.0))), rel=1e-12)


def test_log_sigma_grid_resolves_concentrated_data_in_few_steps():
    """Data with variance ~1e-3: the integrand sits at s(tau) ~ 0.03, inside the first step of a uniform-tau grid.
    16 rk4 steps on the log-sigma grid land within 0.05 nats/dim of the exact density (the residual is mostly the
    EPS offset: the data enter with extra variance s(EPS)^2 ~ 1e-5); the uniform-tau grid is off by > 1 nat/dim."""
    g = torch.Generator().manual_seed(5)
    m = torch.randn(2, 4, generator=g, dtype=torch.float64)
    v = 1e-3 * (1 + torch.rand(2, 4, generator=g, dtype=torch.float64))
    joint = GaussianScore(m, v, sigma=1e4, mean=torch.tensor([0.3, -0.2]), std=torch.tensor([1.5, 0.7])).double()
    w = m + v.sqrt() * torch.randn(16, 2, 4, generator=g, dtype=torch.float64)
    x, p = w[:, :1], torch.ones(16, dtype=torch.float64)
    err = {}
    for spacing in SPACINGS:
        res = certificate(DensityModels(joint=joint), Shift(w[:, 1:]), x, p, steps=16, spacing=spacing,
                          divergence="exact")  # fmt: skip
        exact = _exact_log_prob(torch.cat([x, res.prediction], dim=1), m, v)
        err[spacing] = float((res.log_prob - exact).abs().max()) / 8
    assert err["log_sigma"] < 0.05
    assert err["tau"] > 1.0


def test_bad_inputs_raise_clear_errors():
    _, _, joint, marginal, _ = _gaussian_setup(8, 4, dtype=torch.float32)
    models = DensityModels(joint=joint, input=marginal)
    x, p = torch.zeros(4, 1, 8), torch.ones(4)
    good = Shift(torch.zeros(1, 1, 8))
    with pytest.raises(ValueError, match="x: expected shape"):
        certificate(models, good, torch.zeros(4, 1, 16), p, steps=2)
    with pytest.raises(ValueError, match="NaN"):
        certificate(models, good, torch.full((4, 1, 8), math.nan), p, steps=2)
    with pytest.raises(ValueError, match="regressor: expected an output of shape"):
        certificate(models, Shift(torch.zeros(1, 2, 8)), x, p, steps=2)
    with pytest.raises(ValueError, match="variant"):
        certificate(models, good, x, p, variant="joint", steps=2)
    with pytest.raises(ValueError, match="output"):
        certificate(models, good, x, p, variant="x|y", steps=2)
    with pytest.raises(ValueError, match="param"):
        certificate(models, good, x, torch.ones(3), steps=2)


def test_threshold_is_median_minus_k_std():
    rng = np.random.default_rng(0)
    s = rng.normal(3.0, 2.0, size=33)
    assert calibrate_threshold(torch.tensor(s)) == pytest.approx(np.median(s) - 1.5 * np.std(s, ddof=1))
    assert calibrate_threshold(torch.tensor(s), k=0.0) == pytest.approx(np.median(s))


def test_auroc_acc_fpr_and_correlations():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(3000, generator=g), torch.randn(3000, generator=g)
    assert abs(auroc(a, b) - 0.5) < 0.03  # identical laws: s.e. ~0.0075
    assert auroc(a, b - 10) == 1.0 and auroc(a, b + 10) == 0.0
    # AUROC of N(0,1) vs N(-1,1) is Phi(1/sqrt(2)) = 0.7602
    assert abs(auroc(a, b - 1) - 0.7602) < 0.02
    assert auroc(torch.ones(5), torch.ones(5)) == 0.5  # ties count half
    acc, fpr = acc_fpr_at_threshold(torch.tensor([1.0, 2, 3, 4]), torch.tensor([0.0, 0.5, 5.0]), 1.5)
    assert fpr == 0.25 and acc == pytest.approx(0.5 * (0.75 + 2 / 3))


def test_error_model_recovers_an_exponential_law():
    c = torch.linspace(-3, 1, 50, dtype=torch.float64)
    model = ErrorModel.fit(c, 0.2 * torch.exp(-1.7 * c))
    assert model.a == pytest.approx(0.2) and model.b == pytest.approx(1.7)
    with pytest.raises(ValueError, match="errors"):
        ErrorModel.fit(c, -torch.ones(50, dtype=torch.float64))


def test_score_model_training_lowers_the_denoising_loss_and_likelihood_prefers_data(one_thread):
    """A tiny joint model on y = -x fields: after 100 steps real pairs get a higher certificate than pairs with the
    sign of y flipped (a shift that leaves both marginals unchanged)."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    x = torch.sin(2 * math.pi * (torch.arange(8) / 8 + torch.rand(256, 1, 1, generator=g)))
    z = torch.cat([x, -x], dim=1)
    model = JointScoreModel(2, 8, sigma=10.0, net_channels=(16,), time_dim=16, mean=torch.zeros(2),
                            std=torch.ones(2))  # fmt: skip
    train_score_model(model, z, steps=100, batch_size=64, lr=3e-3, generator=g)
    models = DensityModels(joint=model)
    xs = x[:32]
    good = certificate(models, lambda u, p: -u, xs, torch.ones(32), steps=12, generator=g)
    bad = certificate(models, lambda u, p: u, xs, torch.ones(32), steps=12, generator=g)
    assert auroc(good.score, bad.score) > 0.95
