"""Benchmark scenarios of flowlab.biology_dynamics (entry point `flowlab.benchmarks`, prefix `bio`)."""

from flowlab.biology_dynamics.wfr_fm.benchmarks import SCENARIOS as _WFR_FM

SCENARIOS = (*_WFR_FM,)

__all__ = ["SCENARIOS"]
