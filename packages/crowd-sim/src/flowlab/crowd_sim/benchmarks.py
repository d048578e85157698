"""All benchmark scenarios of flowlab.crowd_sim (entry point `flowlab.benchmarks`, prefix `crowd`)."""

from flowlab.crowd_sim.envsocial_diff.benchmarks import SCENARIOS as _ENVSOCIAL_DIFF
from flowlab.crowd_sim.envsocial_diff.forecast_benchmarks import FORECAST

SCENARIOS = (*_ENVSOCIAL_DIFF, FORECAST)

__all__ = ["SCENARIOS"]
