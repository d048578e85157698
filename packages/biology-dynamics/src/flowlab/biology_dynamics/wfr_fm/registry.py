"""Method name -> model class, for the CLI and for loading a saved model whatever its method.

The top of the method's import graph: it imports every model module, and none of them imports it.
"""

from __future__ import annotations

import os

import torch

from flowlab.biology_dynamics.wfr_fm.model import TimeCourseModel, WFRFlowMatching, checkpoint_meta
from flowlab.biology_dynamics.wfr_fm.names import METHODS
from flowlab.biology_dynamics.wfr_fm.neural_ode_growth import GrowthNeuralODE
from flowlab.biology_dynamics.wfr_fm.ot_cfm import OTCFM
from flowlab.biology_dynamics.wfr_fm.uot_cfm import UOTCFM

__all__ = ["METHODS", "load_model", "model_class"]

_CLASSES: dict[str, type[TimeCourseModel]] = dict(
    zip(METHODS, (WFRFlowMatching, OTCFM, UOTCFM, GrowthNeuralODE), strict=True)
)


def model_class(method: str) -> type[TimeCourseModel]:
    """The TimeCourseModel subclass for a method name in `METHODS`."""
    if method not in _CLASSES:
        raise ValueError(f"method: expected one of {list(_CLASSES)}, got {method!r}")
    return _CLASSES[method]


def load_model(path: str | os.PathLike[str], *, device: torch.device | str = "cpu") -> TimeCourseModel:
    """Rebuild a model saved with `TimeCourseModel.save` (the folder or its parent), of the class its method names."""
    _, meta = checkpoint_meta(path)
    return model_class(meta["method"]).load(path, device=device)
