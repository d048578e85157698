"""`flowlab molecular`: the molecular package's command group; each method folder's commands are mounted in it."""

import typer

from flowlab.molecular.wt_asbs import cli as wt_asbs_cli

app = typer.Typer(help="Molecular Boltzmann sampling: WT-ASBS (sample, metad, evaluate, export).", no_args_is_help=True)
app.registered_commands += wt_asbs_cli.app.registered_commands

__all__ = ["app"]
