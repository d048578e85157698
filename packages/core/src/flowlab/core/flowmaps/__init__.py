"""Two-time flow maps X_{s,t}: the parametrisation with X_{s,s} = Id, one anchored on a frozen teacher field
(`anchored`), teacher maps by integration, time-pair sampling, and pi-Flow's network-free velocity policies
(`policies`) and the student heads that build them (`heads`).

The objectives that train flow maps live in `flowlab.core.losses.flow_map`; any-step sampling is
`flowlab.core.solvers.sample_flow_map`.
"""

from flowlab.core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "flowlab.core.flowmaps.anchored": ["AnchoredFlowMap"],
        "flowlab.core.flowmaps.base": [
            "DiagonalField",
            "FlowMapFromField",
            "ParametrisedFlowMap",
            "TimePairs",
            "check_flow_map_inputs",
            "diagonal_velocity",
            "flow_map_ends",
            "move_by_velocity",
            "sample_time_pairs",
            "stack_end_times",
        ],
        "flowlab.core.flowmaps.heads": ["DXHead", "GMHead"],
        "flowlab.core.flowmaps.policies": [
            "DXPolicy",
            "GMPolicy",
            "Policy",
            "average_velocity",
            "num_substeps",
            "rollout",
        ],
    },
)
