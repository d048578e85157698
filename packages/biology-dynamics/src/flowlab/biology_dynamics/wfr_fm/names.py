"""The method names of WFR-FM and its baselines, kept free of heavy imports for the `flowlab cells` CLI."""

__all__ = ["METHODS"]

METHODS = ("wfr_fm", "ot_cfm", "uot_cfm", "neural_ode")
