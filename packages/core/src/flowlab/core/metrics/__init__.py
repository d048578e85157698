"""Sample-quality metrics: MMD, Wasserstein (exact, Sinkhorn, sliced), energy and Frechet distances, PRDC; rank and
linear correlation.

Gaussianity tests of latents (KS, chi-square of block norms, moments, covariance spectrum against the
Marchenko-Pastur edge, a classifier two-sample test) serve the watermark methods.
"""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.metrics.correlation": ["pearson", "rankdata", "spearman"],
        "flowlab.core.metrics.energy_distance": ["energy_distance"],
        "flowlab.core.metrics.frechet": ["frechet_distance", "frechet_distance_from_moments"],
        "flowlab.core.metrics.gaussianity": [
            "TestResult",
            "classifier_two_sample_test",
            "covariance_spectrum_test",
            "gaussianity_report",
            "ks_marginals",
            "moment_tests",
            "norm_chi2_test",
            "sign_covariance_test",
            "third_moment_test",
        ],
        "flowlab.core.metrics.mmd": ["median_bandwidth", "mmd"],
        "flowlab.core.metrics.prdc": ["PRDC", "precision_recall_knn"],
        "flowlab.core.metrics.wasserstein": [
            "sinkhorn_distance",
            "sinkhorn_distance_batched",
            "sliced_wasserstein",
            "wasserstein",
        ],
    },
)
