"""The core's benchmark scenarios, registered under the `flowlab.benchmarks` entry point."""

from flowlab.core.benchmarks import ot_coupling, sampler_overhead, solvers

SCENARIOS = (solvers.SCENARIO, sampler_overhead.SCENARIO, ot_coupling.SCENARIO)
