"""Sample-quality metrics: MMD, Wasserstein (exact, Sinkhorn, sliced), energy and Frechet distances, PRDC; rank and
linear correlation.

Gaussianity tests of latents (KS, chi-square of block norms, moments, covariance spectrum against the
Marchenko-Pastur edge, a classifier two-sample test) serve the watermark methods.
"""

from flowlab.core.metrics.correlation import pearson, rankdata, spearman
from flowlab.core.metrics.energy_distance import energy_distance
from flowlab.core.metrics.frechet import frechet_distance, frechet_distance_from_moments
from flowlab.core.metrics.gaussianity import (
    TestResult,
    classifier_two_sample_test,
    covariance_spectrum_test,
    gaussianity_report,
    ks_marginals,
    moment_tests,
    norm_chi2_test,
    sign_covariance_test,
    third_moment_test,
)
from flowlab.core.metrics.mmd import median_bandwidth, mmd
from flowlab.core.metrics.prdc import PRDC, precision_recall_knn
from flowlab.core.metrics.wasserstein import (
    sinkhorn_distance,
    sinkhorn_distance_batched,
    sliced_wasserstein,
    wasserstein,
)

__all__ = [
    "PRDC",
    "TestResult",
    "classifier_two_sample_test",
    "covariance_spectrum_test",
    "energy_distance",
    "frechet_distance",
    "frechet_distance_from_moments",
    "gaussianity_report",
    "ks_marginals",
    "median_bandwidth",
    "mmd",
    "moment_tests",
    "norm_chi2_test",
    "pearson",
    "precision_recall_knn",
    "rankdata",
    "sign_covariance_test",
    "sinkhorn_distance",
    "sinkhorn_distance_batched",
    "sliced_wasserstein",
    "spearman",
    "third_moment_test",
    "wasserstein",
]
