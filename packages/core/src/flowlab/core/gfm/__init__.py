"""Generalised Flow Maps (GFM): few-step generation on Riemannian manifolds (Davis et al., arXiv 2510.21608).

X_{s,t}(x) = exp_x((t − s) v_{s,t}(x)) trained by RFM on the diagonal plus G-LSD / G-ESD / G-PSD self-distillation
(or the G-MF MeanFlow regression); the RFM baseline, data (earth on S², wrapped-normal mixtures on T^d and the
Poincaré disk), evaluation (geodesic MMD by NFE, NLL from v_{t,t}), benchmarks and the `flowlab manifold` CLI.
"""

from flowlab.core.gfm.data import (
    EARTH_SETS,
    Mixture,
    Split,
    latlon_to_sphere,
    load_angles,
    load_earth,
    poincare_mixture,
    random_torus_mixture,
    split,
    torus_mixture,
)
from flowlab.core.gfm.evaluate import (
    evaluate_nll,
    geodesic_mmd,
    manifold_error,
    mmd_by_nfe,
    reference_bandwidth,
    semigroup_error,
)
from flowlab.core.gfm.model import build_flow_map
from flowlab.core.gfm.objective import OBJECTIVES, GFMLoss, gfm_loss
from flowlab.core.gfm.sample import SAMPLERS, sample
from flowlab.core.gfm.train import GFMConfig, TrainedGFM, flow_map_for, train_gfm

__all__ = [
    "EARTH_SETS",
    "OBJECTIVES",
    "SAMPLERS",
    "GFMConfig",
    "GFMLoss",
    "Mixture",
    "Split",
    "TrainedGFM",
    "build_flow_map",
    "evaluate_nll",
    "flow_map_for",
    "geodesic_mmd",
    "gfm_loss",
    "latlon_to_sphere",
    "load_angles",
    "load_earth",
    "manifold_error",
    "mmd_by_nfe",
    "poincare_mixture",
    "random_torus_mixture",
    "reference_bandwidth",
    "sample",
    "semigroup_error",
    "split",
    "torus_mixture",
    "train_gfm",
]
