"""The shared diffusion/flow engine: schedules, paths, couplings, losses, solvers, likelihood, flow maps, manifolds,
nets, training and the benchmark protocol.

    from flowlab.core import AffinePath, StandardNormal, grids, likelihood, losses, schedules, solvers
"""

from flowlab.core import (
    couplings,
    distributions,
    flowmaps,
    grids,
    likelihood,
    losses,
    manifolds,
    metrics,
    nets,
    paths,
    schedules,
    solvers,
    train,
)
from flowlab.core.distributions import StandardNormal, randn, sample_times
from flowlab.core.likelihood import log_likelihood
from flowlab.core.losses import flow_matching_loss
from flowlab.core.paths import AffinePath, GeodesicPath, PathSample
from flowlab.core.solvers import solve_ode
from flowlab.core.typing import Prediction

__version__ = "0.1.0"

__all__ = [
    "AffinePath",
    "GeodesicPath",
    "PathSample",
    "Prediction",
    "StandardNormal",
    "couplings",
    "distributions",
    "flow_matching_loss",
    "flowmaps",
    "grids",
    "likelihood",
    "log_likelihood",
    "losses",
    "manifolds",
    "metrics",
    "nets",
    "paths",
    "randn",
    "sample_times",
    "schedules",
    "solve_ode",
    "solvers",
    "train",
]
