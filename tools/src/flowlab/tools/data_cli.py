"""`flowlab data list|check`: the shared data-set catalogue and checksum verification (flowlab.datasets, which
imports torch, loads when a command runs, not for --help)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="The shared data sets: list the catalogue, verify checksums.", no_args_is_help=True)
console = Console()


@app.command("list")
def list_datasets() -> None:
    """List the catalogued data sets and whether each is present under $FLOWLAB_DATA."""
    import flowlab.datasets as fd

    root = fd.root(required=False)
    table = Table("name", "files", "present", "licence", "description")
    for entry in fd.catalogue().values():
        present = "-" if root is None else ("yes" if Path(root, entry.name).is_dir() else "no")
        table.add_row(entry.name, str(len(entry.files)), present, entry.licence, entry.description)
    console.print(table)
    if root is None:
        console.print(f"{fd.ENV_VAR} is not set: data sets cannot be located.")


@app.command("check")
def check(
    name: list[str] = typer.Argument(None, help="Data sets to check (default: all)."),
    data_root: Path = typer.Option(None, "--root", help="Data root (default: $FLOWLAB_DATA)."),
) -> None:
    """Verify the SHA-256 of every file of the shared data sets; exits 1 on a missing or corrupt file."""
    import flowlab.datasets as fd

    try:
        root = data_root if data_root is not None else fd.root()
        names = name or list(fd.catalogue())
        for n in names:
            fd.dataset(n)
    except (FileNotFoundError, ValueError) as err:
        console.print(f"error: {err}", highlight=False)
        raise typer.Exit(2) from None
    failed = 0
    for n in names:
        results = fd.check(n, Path(root))
        bad = [r for r in results if r.status != "ok"]
        if not Path(root, n).is_dir():
            console.print(f"[red]missing[/red] {n}: data set not found at {Path(root, n)}", highlight=False)
        elif bad:
            for r in bad:
                console.print(f"[red]{r.status}[/red] {n}/{r.file}", highlight=False)
        else:
            console.print(f"[green]ok[/green] {n} ({len(results)} files)", highlight=False)
        failed += bool(bad)
    if failed:
        console.print(f"{failed} data set(s) failed verification under {root}")
        raise typer.Exit(1)
