"""Command groups of flowlab.biology_dynamics: `flowlab cells` (WFR-FM: `fit`, `predict`, `evaluate`) and
`flowlab dna` (Wright-Fisher simplicial diffusion: `train`, `sample`, `evaluate`)."""

import typer

from flowlab.biology_dynamics.wfr_fm import cli as wfr_fm_cli
from flowlab.biology_dynamics.wright_fisher import cli as wright_fisher_cli

cells_app = typer.Typer(
    help="WFR-FM: unbalanced single-cell dynamics (velocity + growth) from time-course snapshots.",
    no_args_is_help=True,
)
cells_app.registered_commands += wfr_fm_cli.app.registered_commands

dna_app = typer.Typer(
    help="Wright-Fisher simplicial diffusion (and discrete, Gaussian, masked, unified) on sequences.",
    no_args_is_help=True,
)
dna_app.registered_commands += wright_fisher_cli.app.registered_commands

__all__ = ["cells_app", "dna_app"]
