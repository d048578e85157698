"""`flowlab molecular`: the molecular package's command group; each method folder's commands are mounted in it."""

import typer

from flowlab.molecular.syncogen import cli as syncogen_cli
from flowlab.molecular.wt_asbs import cli as wt_asbs_cli

app = typer.Typer(
    help="Molecular sampling and generation: WT-ASBS (sample, metad, evaluate, export); SynCoGen (syncogen ...).",
    no_args_is_help=True,
)
app.registered_commands += wt_asbs_cli.app.registered_commands
app.add_typer(syncogen_cli.app, name="syncogen")

__all__ = ["app"]
