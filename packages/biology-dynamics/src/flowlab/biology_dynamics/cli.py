"""Command groups of flowlab.biology_dynamics: `flowlab cells` (WFR-FM: `fit`, `predict`, `evaluate`)."""

import typer

from flowlab.biology_dynamics.wfr_fm import cli as wfr_fm_cli

cells_app = typer.Typer(
    help="WFR-FM: unbalanced single-cell dynamics (velocity + growth) from time-course snapshots.",
    no_args_is_help=True,
)
cells_app.registered_commands += wfr_fm_cli.app.registered_commands

__all__ = ["cells_app"]
