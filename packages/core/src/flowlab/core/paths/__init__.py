"""Probability paths between a source and the data: affine, bridge, geodesic and discrete."""

from flowlab.core.paths.affine import AffinePath
from flowlab.core.paths.base import DiscretePathSample, PathSample

__all__ = ["AffinePath", "DiscretePathSample", "PathSample"]
