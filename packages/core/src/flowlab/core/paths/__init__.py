"""Probability paths between a source and the data: affine, bridge, geodesic and discrete."""

from flowlab.core.paths.affine import AffinePath
from flowlab.core.paths.base import DiscretePathSample, PathSample
from flowlab.core.paths.bridge import AugmentedBridgePath, BridgePath, BridgePathSample
from flowlab.core.paths.discrete import LogLinearKappa, MaskedDiscretePath, MixtureDiscretePath, UniformDiscretePath
from flowlab.core.paths.geodesic import GeodesicPath

__all__ = [
    "AffinePath",
    "AugmentedBridgePath",
    "BridgePath",
    "BridgePathSample",
    "DiscretePathSample",
    "GeodesicPath",
    "LogLinearKappa",
    "MaskedDiscretePath",
    "MixtureDiscretePath",
    "PathSample",
    "UniformDiscretePath",
]
