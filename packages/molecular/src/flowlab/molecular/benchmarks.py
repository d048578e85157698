"""All benchmark scenarios of flowlab.molecular (entry point `flowlab.benchmarks`: mol)."""

from flowlab.molecular.syncogen.benchmarks import SCENARIOS as _SYNCOGEN
from flowlab.molecular.wt_asbs.benchmarks import SCENARIOS as _WT_ASBS

SCENARIOS = (*_WT_ASBS, *_SYNCOGEN)

__all__ = ["SCENARIOS"]
