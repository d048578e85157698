"""The method and preset names of WFR-FM and its baselines, kept free of heavy imports for the `flowlab cells` CLI."""

__all__ = ["METHODS", "PLAN_SOLVERS", "PRESETS"]

METHODS = ("wfr_fm", "ot_cfm", "uot_cfm", "neural_ode")
#: the size presets of `presets` (the benchmarks' variants)
PRESETS = ("smoke", "quick", "full")
#: the unbalanced plan solvers of the plan-based methods (`UnbalancedOTCoupling`'s `solver`)
PLAN_SOLVERS = ("mm", "sinkhorn")
