"""MAC-Flow's benchmark scenarios: `toys` (the coordination games) and `spread` (offline MPE simple_spread with the
latency table); `common` holds what they share."""

from flowlab.rl_control.mac_flow.benchmarks.spread import SPREAD
from flowlab.rl_control.mac_flow.benchmarks.toys import TOYS

SCENARIOS = (TOYS, SPREAD)

__all__ = ["SCENARIOS", "SPREAD", "TOYS"]
