"""The core's benchmark scenarios, registered under the `flowlab.benchmarks` entry point."""

from flowlab.core.benchmarks import likelihood, ot_coupling, sampler_overhead, solvers
from flowlab.core.gfm.benchmarks import SCENARIOS as GFM_SCENARIOS

SCENARIOS = (solvers.SCENARIO, likelihood.SCENARIO, sampler_overhead.SCENARIO, ot_coupling.SCENARIO, *GFM_SCENARIOS)
