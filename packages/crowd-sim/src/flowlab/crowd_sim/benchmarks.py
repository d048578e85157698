"""All benchmark scenarios of flowlab.crowd_sim (entry point `flowlab.benchmarks`, prefix `crowd`)."""

from flowlab.crowd_sim.envsocial_diff.benchmarks import SCENARIOS as _ENVSOCIAL_DIFF

SCENARIOS = (*_ENVSOCIAL_DIFF,)

__all__ = ["SCENARIOS"]
