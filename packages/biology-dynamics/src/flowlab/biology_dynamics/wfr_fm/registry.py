"""Method name -> model class, for loading saved models and for the CLI."""

from __future__ import annotations

__all__ = ["METHODS", "model_class"]

METHODS = ("wfr_fm", "ot_cfm", "uot_cfm", "neural_ode")


def model_class(method: str):
    """The TimeCourseModel subclass for a method name in `METHODS`."""
    from flowlab.biology_dynamics.wfr_fm.model import WFRFlowMatching
    from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import GrowthNeuralODE
    from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFM
    from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFM

    classes = {"wfr_fm": WFRFlowMatching, "ot_cfm": OTCFM, "uot_cfm": UOTCFM, "neural_ode": GrowthNeuralODE}
    if method not in classes:
        raise ValueError(f"method: expected one of {list(classes)}, got {method!r}")
    return classes[method]
