"""`flowlab molecular`: WT-ASBS `sample|metad|evaluate`."""

import typer

from flowlab.molecular.wt_asbs import cli as _wt

app = typer.Typer(help="Molecular Boltzmann sampling: WT-ASBS (sample, metad, evaluate).", no_args_is_help=True)
app.command("sample")(_wt.sample)
app.command("metad")(_wt.metad)
app.command("evaluate")(_wt.evaluate)

__all__ = ["app"]
