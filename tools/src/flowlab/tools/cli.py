"""The `flowlab` command: benchmarks, data, the cache and the command groups that packages contribute, every group
imported only when it runs (`flowlab --help` imports no torch)."""

from __future__ import annotations

import typer

from flowlab.tools.plugins import DEBUG_KEY, LazyGroup
from flowlab.tools.versions import library_versions, member_versions

app = typer.Typer(
    cls=LazyGroup,
    help="FlowLab: diffusion and flow-matching methods for science, on one shared engine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if not value:
        return
    from rich.console import Console

    console = Console()
    for name, version in {**member_versions(), **library_versions()}.items():
        console.print(f"{name} {version}", highlight=False)
    raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print every member's version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show the full traceback of an input error."),
) -> None:
    """FlowLab: diffusion and flow-matching methods for science, on one shared engine."""
    ctx.meta[DEBUG_KEY] = debug


def main() -> None:
    """The `flowlab` console script: run the typer app on sys.argv."""
    app()
