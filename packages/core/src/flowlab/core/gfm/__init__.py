"""Generalised Flow Maps (GFM): few-step generation on Riemannian manifolds (Davis et al., arXiv 2510.21608).

X_{s,t}(x) = exp_x((t − s) v_{s,t}(x)) trained by RFM on the diagonal plus G-LSD / G-ESD / G-PSD self-distillation
(or the G-MF MeanFlow regression); the RFM baseline, data (earth on S², wrapped-normal mixtures on T^d and the
Poincaré disk), evaluation (geodesic MMD by NFE beside its noise floor, NLL from v_{t,t}), sample-density plots,
benchmarks and the `flowlab manifold` CLI.
"""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.gfm.data": [
            "EARTH_SETS",
            "Mixture",
            "Split",
            "latlon_to_sphere",
            "load_angles",
            "load_earth",
            "poincare_mixture",
            "random_torus_mixture",
            "save_table",
            "sphere_to_latlon",
            "split",
            "torus_mixture",
        ],
        "flowlab.core.gfm.evaluate": [
            "MAX_REFERENCE",
            "evaluate_nll",
            "geodesic_mmd",
            "manifold_error",
            "mmd_by_nfe",
            "mmd_split_floor",
            "reference_bandwidth",
            "semigroup_error",
        ],
        "flowlab.core.gfm.model": ["build_flow_map"],
        "flowlab.core.gfm.objective": ["OBJECTIVES", "GFMLoss", "gfm_loss"],
        "flowlab.core.gfm.plot": ["Chart", "DensityPlot", "chart", "plot_density"],
        "flowlab.core.gfm.sample": ["SAMPLERS", "sample"],
        "flowlab.core.gfm.train": ["GFMConfig", "TrainedGFM", "flow_map_for", "train_gfm"],
    },
)
