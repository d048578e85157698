"""`flowlab crowd`: the command group of flowlab.crowd_sim, with EnvSocial-Diff's
`train|simulate|predict|evaluate|render|export`."""

import typer

from flowlab.crowd_sim.envsocial_diff import cli as envsocial_diff_cli

app = typer.Typer(
    help="EnvSocial-Diff crowd simulation: train, simulate, predict, evaluate, render, export.", no_args_is_help=True
)
app.registered_commands += envsocial_diff_cli.app.registered_commands

__all__ = ["app"]
