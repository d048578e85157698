"""WFR-FM: Wasserstein–Fisher–Rao flow matching for unbalanced single-cell dynamics, with its baselines
(OT-CFM, UOT-CFM, a simulation-trained growth neural ODE), AnnData I/O, a toggle-switch generator with known
growth, evaluation, plots (scanpy-style in `pl`), benchmarks and the `flowlab cells` CLI."""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.biology_dynamics.wfr_fm.data": [
            "SINGLE_CELL_FILES",
            "TimeSeries",
            "load_single_cell",
            "read_time_series_csv",
            "time_series_from_adata",
        ],
        "flowlab.biology_dynamics.wfr_fm.evaluate": [
            "TimePointMetrics",
            "evaluate_time_points",
            "gene_growth_profile",
            "growth_correlation",
            "path_action",
            "static_action",
            "tmv",
            "w1",
        ],
        "flowlab.biology_dynamics.wfr_fm.generators": [
            "ToggleSwitchParams",
            "branching_toggle_switch",
            "toggle_switch_growth",
        ],
        "flowlab.biology_dynamics.wfr_fm.model": ["GrowthFields", "TimeCourseModel", "WFRConfig", "WFRFlowMatching"],
        "flowlab.biology_dynamics.wfr_fm.neural_ode_growth": ["GrowthNeuralODE", "NeuralODEConfig"],
        "flowlab.biology_dynamics.wfr_fm.objective": ["UnbalancedPlans", "matching_loss", "unbalanced_plans"],
        "flowlab.biology_dynamics.wfr_fm.ot_cfm": ["OTCFM", "OTCFMConfig"],
        "flowlab.biology_dynamics.wfr_fm.path": ["WFRDiracPath", "WFRPathSample", "wfr_cost", "wfr_distance_sq"],
        "flowlab.biology_dynamics.wfr_fm.pl": ["growth", "trajectories", "velocity_embedding"],
        "flowlab.biology_dynamics.wfr_fm.plot": ["plot_fit"],
        "flowlab.biology_dynamics.wfr_fm.presets": ["MATCHING", "NEURAL_ODE", "PRESETS", "sized"],
        "flowlab.biology_dynamics.wfr_fm.registry": ["METHODS", "load_model", "model_class"],
        "flowlab.biology_dynamics.wfr_fm.sample": ["ParticleTrajectory", "simulate_particles"],
        "flowlab.biology_dynamics.wfr_fm.tl": ["CellsFit", "annotate", "fit"],
        "flowlab.biology_dynamics.wfr_fm.uot_cfm": ["UOTCFM", "UOTCFMConfig"],
    },
    submodules=["pl", "tl"],  # scanpy's namespaces: pl.velocity_embedding(adata), tl.fit(adata)
)
