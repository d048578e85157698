"""Benchmark scenarios of flowlab.biology_dynamics (entry point `flowlab.benchmarks`, prefix `bio`)."""

from flowlab.biology_dynamics.wfr_fm.benchmarks import SCENARIOS as _WFR_FM
from flowlab.biology_dynamics.wright_fisher.benchmarks import SCENARIOS as _WRIGHT_FISHER

SCENARIOS = (*_WFR_FM, *_WRIGHT_FISHER)

__all__ = ["SCENARIOS"]
