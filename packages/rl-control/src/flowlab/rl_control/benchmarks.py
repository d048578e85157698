"""Benchmark scenarios of the RL package (entry point `flowlab.benchmarks`: rl)."""

from flowlab.rl_control.mac_flow.benchmarks import SCENARIOS as _MAC_FLOW
from flowlab.rl_control.value_flows.benchmarks import SCENARIOS as _VALUE_FLOWS

SCENARIOS = (*_VALUE_FLOWS, *_MAC_FLOW)

__all__ = ["SCENARIOS"]
