"""The method and preset names of WFR-FM and its baselines, kept free of heavy imports for the `flowlab cells` CLI."""

__all__ = ["METHODS", "PRESETS"]

METHODS = ("wfr_fm", "ot_cfm", "uot_cfm", "neural_ode")
#: the size presets of `presets` (the benchmarks' variants)
PRESETS = ("smoke", "quick", "full")
