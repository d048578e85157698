"""`flowlab rl`: the RL package's command group; Value Flows mounts `collect`, `train` and `evaluate`."""

import typer

from flowlab.rl_control.value_flows import cli as value_flows

app = typer.Typer(
    help="Flow-based RL: Value Flows, flow-based distributional RL (collect data, train, evaluate).",
    no_args_is_help=True,
)
app.registered_commands += value_flows.app.registered_commands

__all__ = ["app"]
