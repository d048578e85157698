"""Gaussianity tests: calibrated on N(0, I) (p-values ~ uniform over seeds), powerful against planted structure."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from flowlab.core.metrics.gaussianity import (
    classifier_two_sample_test,
    covariance_spectrum_test,
    gaussianity_report,
    ks_marginals,
    moment_tests,
    norm_chi2_test,
    sign_covariance_test,
    third_moment_test,
)


def test_p_values_are_uniform_under_the_null():
    ps = {"ks": [], "chi2": [], "third": [], "skew": []}
    for seed in range(50):
        g = torch.Generator().manual_seed(seed)
        z = torch.randn(200, 40, generator=g, dtype=torch.float64)
        ps["ks"].append(ks_marginals(z).details["fisher_p"])
        ps["chi2"].append(norm_chi2_test(z, blocks=4).p_value)
        ps["third"].append(third_moment_test(z, n_triples=100, generator=g).p_value)
        ps["skew"].append(moment_tests(z)["skewness"].p_value)
    for name, p in ps.items():
        assert stats.kstest(p, "uniform").pvalue > 0.01, name


def test_ks_p_values_match_scipy_exact():
    z = torch.randn(300, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ours = ks_marginals(z)
    exact = [stats.kstest(z[:, j].numpy(), "norm").pvalue for j in range(3)]
    assert abs(ours.details["mean_p"] - np.mean(exact)) < 5e-3


def test_spectrum_at_the_edge_for_gaussian_and_far_above_for_planted_low_rank():
    g = torch.Generator().manual_seed(1)
    n, p = 200, 300
    z = torch.randn(n, p, generator=g, dtype=torch.float64)
    res = covariance_spectrum_test(z, n_null=3, generator=g)
    assert 0.93 < res.statistic < 1.07 and res.p_value > 0.1
    # planted rank-k structure with unit marginal variance: z = sqrt(1-a) eps + sqrt(a) U w
    k, a = 5, 0.3
    u = torch.linalg.qr(torch.randn(p, k, generator=g, dtype=torch.float64)).Q * (p / k) ** 0.5
    power = 0
    for _ in range(10):
        w = torch.randn(n, k, generator=g, dtype=torch.float64)
        zz = (1 - a) ** 0.5 * torch.randn(n, p, generator=g, dtype=torch.float64) + a**0.5 * w @ u.T
        power += covariance_spectrum_test(zz).statistic > 1.2
    assert power >= 9  # power >= 0.9 over 10 planted samples


def test_sign_covariance_and_classifier_catch_patterns():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(400, 64, generator=g, dtype=torch.float64).abs()
    z = z * torch.where(torch.arange(64) % 2 == 0, 1.0, -1.0).double()  # fixed sign pattern, |z| Gaussian
    assert sign_covariance_test(z).statistic > 5
    shifted = torch.randn(400, 64, generator=g, dtype=torch.float64) + 0.3
    res = classifier_two_sample_test(shifted, generator=g)
    assert res.statistic > 0.7 and res.p_value < 1e-6
    null = classifier_two_sample_test(torch.randn(400, 64, generator=g, dtype=torch.float64), generator=g)
    assert null.details["acc_ci_low"] < 0.5 < null.details["acc_ci_high"] + 0.05


def test_report_and_errors():
    g = torch.Generator().manual_seed(3)
    rep = gaussianity_report(torch.randn(100, 32, generator=g), generator=g, blocks=4, classifier=None)
    assert {"ks_min_p_bonf", "top_eig_over_edge", "sign_top_eig_over_edge", "third_moment_p"} <= set(rep)
    with pytest.raises(ValueError, match="z"):
        ks_marginals(torch.randn(10))
    with pytest.raises(ValueError, match="blocks"):
        norm_chi2_test(torch.randn(10, 6), blocks=4)
    with pytest.raises(ValueError, match="model"):
        classifier_two_sample_test(torch.randn(10, 6), model="svm", generator=g)
