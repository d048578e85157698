"""Sample-quality metrics: MMD, Wasserstein (exact, Sinkhorn, sliced), energy and Frechet distances, PRDC.

The lead adds the Gaussianity tests here once written (metrics/gaussianity.py,
vision-gen--spherical-watermark.md).
"""

from flowlab.core.metrics.energy_distance import energy_distance
from flowlab.core.metrics.frechet import frechet_distance, frechet_distance_from_moments
from flowlab.core.metrics.mmd import median_bandwidth, mmd
from flowlab.core.metrics.prdc import PRDC, precision_recall_knn
from flowlab.core.metrics.wasserstein import sinkhorn_distance, sliced_wasserstein, wasserstein

__all__ = [
    "PRDC",
    "energy_distance",
    "frechet_distance",
    "frechet_distance_from_moments",
    "median_bandwidth",
    "mmd",
    "precision_recall_knn",
    "sinkhorn_distance",
    "sliced_wasserstein",
    "wasserstein",
]
