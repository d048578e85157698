"""`flowlab rl`: the RL package's command group (Value Flows: collect, train, evaluate)."""

from flowlab.rl_control.value_flows.cli import app

__all__ = ["app"]
