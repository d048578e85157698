"""The shared diffusion/flow engine: schedules, paths, couplings, losses, solvers, likelihood, flow maps, manifolds,
point-cloud geometry, nets, training and the benchmark protocol.

    from flowlab.core import AffinePath, StandardNormal, grids, likelihood, losses, schedules, solvers
"""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.distributions": ["StandardNormal", "randn", "sample_times"],
        "flowlab.core.likelihood": ["log_likelihood"],
        "flowlab.core.losses": ["flow_matching_loss"],
        "flowlab.core.paths": ["AffinePath", "GeodesicPath", "PathSample"],
        "flowlab.core.solvers": ["solve_ode"],
        "flowlab.core.typing": ["Prediction"],
    },
    submodules=[
        "couplings",
        "distributions",
        "flowmaps",
        "geometry",
        "grids",
        "likelihood",
        "losses",
        "manifolds",
        "metrics",
        "nets",
        "paths",
        "schedules",
        "solvers",
        "train",
    ],
)

__version__ = "0.1.0"
