"""Probability paths between a source and the data: affine, bridge, geodesic and discrete."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.paths.affine": ["AffinePath"],
        "flowlab.core.paths.base": ["DiscretePathSample", "PathSample"],
        "flowlab.core.paths.bridge": ["AugmentedBridgePath", "BridgePath", "BridgePathSample"],
        "flowlab.core.paths.discrete": [
            "LinearSigmaKappa",
            "LogLinearKappa",
            "MaskedDiscretePath",
            "MixtureDiscretePath",
            "UniformDiscretePath",
        ],
        "flowlab.core.paths.geodesic": ["GeodesicPath"],
    },
)
