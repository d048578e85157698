"""Value Flows' benchmark scenarios, one module per family: `chain` (return laws on the chain MDP), `control`
(offline Pendulum and MuJoCo Reacher), `online` (offline-to-online Pendulum); `common` holds what they share."""

from flowlab.rl_control.value_flows.benchmarks.chain import CHAIN
from flowlab.rl_control.value_flows.benchmarks.control import CONTROL, REACHER
from flowlab.rl_control.value_flows.benchmarks.online import ONLINE

SCENARIOS = (CHAIN, CONTROL, REACHER, ONLINE)

__all__ = ["CHAIN", "CONTROL", "ONLINE", "REACHER", "SCENARIOS"]
