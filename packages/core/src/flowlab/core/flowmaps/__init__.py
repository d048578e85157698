"""Two-time flow maps X_{s,t}: parametrisation with X_{s,s} = Id, teacher maps by integration, time-pair
sampling.

The objectives that train them live in `flowlab.core.losses.flow_map`; any-step sampling is
`flowlab.core.solvers.sample_flow_map`.
"""

from flowlab.core.flowmaps.base import (
    DiagonalField,
    FlowMapFromField,
    ParametrisedFlowMap,
    TimePairs,
    check_flow_map_inputs,
    diagonal_velocity,
    sample_time_pairs,
)

__all__ = [
    "DiagonalField",
    "FlowMapFromField",
    "ParametrisedFlowMap",
    "TimePairs",
    "check_flow_map_inputs",
    "diagonal_velocity",
    "sample_time_pairs",
]
