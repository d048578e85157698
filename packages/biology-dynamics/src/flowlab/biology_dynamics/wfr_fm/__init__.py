"""WFR-FM: Wasserstein–Fisher–Rao flow matching for unbalanced single-cell dynamics, with its baselines
(OT-CFM, UOT-CFM, a simulation-trained growth neural ODE), AnnData I/O, a toggle-switch generator with known
growth, evaluation, plots, benchmarks and the `flowlab cells` CLI."""

from flowlab.biology_dynamics.wfr_fm.data import (
    SINGLE_CELL_FILES,
    TimeSeries,
    load_single_cell,
    read_time_series_csv,
    time_series_from_adata,
)
from flowlab.biology_dynamics.wfr_fm.evaluate import (
    TimePointMetrics,
    evaluate_time_points,
    gene_growth_profile,
    growth_correlation,
    path_action,
    static_action,
    tmv,
    w1,
)
from flowlab.biology_dynamics.wfr_fm.generators import ToggleSwitchParams, branching_toggle_switch, toggle_switch_growth
from flowlab.biology_dynamics.wfr_fm.model import GrowthFields, TimeCourseModel, WFRConfig, WFRFlowMatching
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import GrowthNeuralODE, NeuralODEConfig
from flowlab.biology_dynamics.wfr_fm.objective import UnbalancedPlans, matching_loss, unbalanced_plans
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFM, OTCFMConfig
from flowlab.biology_dynamics.wfr_fm.path import WFRDiracPath, WFRPathSample, wfr_cost, wfr_distance_sq
from flowlab.biology_dynamics.wfr_fm.plot import plot_fit
from flowlab.biology_dynamics.wfr_fm.registry import METHODS, load_model, model_class
from flowlab.biology_dynamics.wfr_fm.sample import ParticleTrajectory, simulate_particles
from flowlab.biology_dynamics.wfr_fm.tl import CellsFit, annotate, fit
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFM, UOTCFMConfig

__all__ = [
    "METHODS",
    "OTCFM",
    "SINGLE_CELL_FILES",
    "UOTCFM",
    "CellsFit",
    "GrowthFields",
    "GrowthNeuralODE",
    "NeuralODEConfig",
    "OTCFMConfig",
    "ParticleTrajectory",
    "TimeCourseModel",
    "TimePointMetrics",
    "TimeSeries",
    "ToggleSwitchParams",
    "UOTCFMConfig",
    "UnbalancedPlans",
    "WFRConfig",
    "WFRDiracPath",
    "WFRFlowMatching",
    "WFRPathSample",
    "annotate",
    "branching_toggle_switch",
    "evaluate_time_points",
    "fit",
    "gene_growth_profile",
    "growth_correlation",
    "load_model",
    "load_single_cell",
    "matching_loss",
    "model_class",
    "path_action",
    "plot_fit",
    "read_time_series_csv",
    "simulate_particles",
    "static_action",
    "time_series_from_adata",
    "tmv",
    "toggle_switch_growth",
    "unbalanced_plans",
    "w1",
    "wfr_cost",
    "wfr_distance_sq",
]
