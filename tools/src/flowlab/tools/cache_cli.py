"""`flowlab cache list|clear`: the artifact cache under $FLOWLAB_CACHE (trained teachers, generated data sets); the
core loads when a command runs, not for --help."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="The artifact cache: what the benchmarks built once and reuse.", no_args_is_help=True)
console = Console()


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@app.command("list")
def list_entries() -> None:
    """List every cached artifact: name, key, size, build time and date, the torch it was built with."""
    from flowlab.core import artifacts

    found = artifacts.entries()
    table = Table("artifact", "key", "size", "built in", "created", "torch")
    for e in found:
        table.add_row(
            e.get("name", "?"),
            e.get("key", "?"),
            _size(e["bytes"]),
            f"{e.get('build_seconds', 0):.0f} s",
            str(e.get("created", "?")),
            str(e.get("torch", "?")),
        )
    console.print(table)
    console.print(f"{len(found)} artifact(s) under {artifacts.cache_root()}", highlight=False)


@app.command("clear")
def clear(name: str = typer.Argument(None, help="Only the entries of this artifact (default: all).")) -> None:
    """Remove cached artifacts (all of them, or every entry of NAME); the next run builds them again."""
    from flowlab.core import artifacts

    known = {e.get("name") for e in artifacts.entries()}
    if name is not None and name not in known:
        console.print(f"error: no cached artifact named {name!r} (cached: {', '.join(sorted(known)) or 'none'})")
        raise typer.Exit(2)
    removed = artifacts.clear(name=name)
    console.print(f"removed {removed} cached artifact(s) from {artifacts.cache_root()}", highlight=False)
