"""`flowlab rl`: the RL package's command group; Value Flows mounts `collect`, `train` and `evaluate`, MAC-Flow
`marl-collect`, `marl-train` and `marl-evaluate`."""

import typer

from flowlab.rl_control.mac_flow import cli as mac_flow
from flowlab.rl_control.value_flows import cli as value_flows

app = typer.Typer(
    help="Flow-based RL: Value Flows (collect, train, evaluate) and MAC-Flow (marl-collect, marl-train, "
    "marl-evaluate).",
    no_args_is_help=True,
)
app.registered_commands += value_flows.app.registered_commands
app.registered_commands += mac_flow.app.registered_commands

__all__ = ["app"]
