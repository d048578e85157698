"""All benchmark scenarios of flowlab.molecular (entry point `flowlab.benchmarks`: mol)."""

from flowlab.molecular.wt_asbs.benchmarks import SCENARIOS as _WT_ASBS

SCENARIOS = (*_WT_ASBS,)

__all__ = ["SCENARIOS"]
