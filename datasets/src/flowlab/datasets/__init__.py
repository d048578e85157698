"""FlowLab data: the shared-data-set catalogue, data-root resolution over $FLOWLAB_DATA, and synthetic generators."""

from flowlab.datasets.catalogue import Dataset, FileCheck, catalogue, check, dataset
from flowlab.datasets.growth import GrowthMixture, growth_mixture
from flowlab.datasets.paths import ENV_VAR, path, root
from flowlab.datasets.toys import TOYS, sample_toy

__version__ = "0.1.0"

__all__ = [
    "ENV_VAR",
    "TOYS",
    "Dataset",
    "FileCheck",
    "GrowthMixture",
    "catalogue",
    "check",
    "dataset",
    "growth_mixture",
    "path",
    "root",
    "sample_toy",
]
