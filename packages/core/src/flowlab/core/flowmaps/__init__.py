"""Two-time flow maps X_{s,t}: the parametrisation with X_{s,s} = Id, teacher maps by integration, time-pair
sampling, and pi-Flow's network-free velocity policies (`policies`) and the student heads that build them (`heads`).

The objectives that train flow maps live in `flowlab.core.losses.flow_map`; any-step sampling is
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
from flowlab.core.flowmaps.heads import DXHead, GMHead
from flowlab.core.flowmaps.policies import DXPolicy, GMPolicy, Policy, average_velocity, num_substeps, rollout

__all__ = [
    "DXHead",
    "DXPolicy",
    "DiagonalField",
    "FlowMapFromField",
    "GMHead",
    "GMPolicy",
    "ParametrisedFlowMap",
    "Policy",
    "TimePairs",
    "average_velocity",
    "check_flow_map_inputs",
    "diagonal_velocity",
    "num_substeps",
    "rollout",
    "sample_time_pairs",
]
