"""`flowlab bench`: run every scenario's quick variant (or the full suite) and write results, report and plots."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import torch
import typer
from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import flowlab.datasets as fd
from flowlab.tools.bench.discovery import SelectionError, discover, select
from flowlab.tools.bench.report import load_records, write_report
from flowlab.tools.bench.runner import Record, run_all
from flowlab.tools.versions import git_commit, library_versions, member_versions

app = typer.Typer(help="Benchmarks: every method against its baselines, in one run.", invoke_without_command=True)
console = Console()
_STATUS_STYLE = {"ok": "green", "skipped": "yellow", "error": "red"}


def fail(message: str) -> None:
    """Print a one-line error and exit 2 (a bad invocation)."""
    console.print(f"error: {message}", highlight=False, markup=False)
    raise typer.Exit(2)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        fail(f"--device: unknown device {name!r}; expected auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("--device: CUDA was requested but no CUDA device is available")
    return device


def _headline(rec: Record) -> str:
    if rec.status != "ok":
        return rec.message[:90]
    items = list(rec.metrics.items())[:3]
    return ", ".join(f"{k}={v:.3g}" for k, v in items)


def _table(records: list[Record], running: str | None) -> Table:
    table = Table("scenario", "seed", "status", "wall s", "headline metrics", expand=False)
    for rec in records:
        style = _STATUS_STYLE[rec.status]
        table.add_row(
            rec.name,
            str(rec.seed),
            f"[{style}]{rec.status}[/{style}]",
            f"{rec.wall_seconds:.1f}",
            _headline(rec),
        )
    if running:
        table.add_row(running, "", "[cyan]running[/cyan]", "", "")
    return table


@app.callback()
def bench(
    ctx: typer.Context,
    suite: str = typer.Option("quick", "--suite", help="quick (every scenario's quick variant) or full."),
    only: list[str] = typer.Option(
        None, "--only", help="Scenario name, dotted prefix, substring or glob (repeatable)."
    ),
    list_: bool = typer.Option(False, "--list", help="List the selected scenarios and exit."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    seeds: int = typer.Option(1, "--seeds", help="Number of seeds per scenario (seeds 0..N-1)."),
    first_seed: int = typer.Option(
        0, "--first-seed", help="First seed: K runs seeds K..K+N-1 (to add seeds to an earlier run)."
    ),
    out: Path = typer.Option(None, "--out", help="Output folder (default results/<timestamp>)."),
) -> None:
    """Run every registered scenario (`quick` suite by default) and write results.jsonl, report.md and plots."""
    if ctx.invoked_subcommand is not None:
        return
    if seeds < 1:
        fail(f"--seeds: expected a positive number of seeds, got {seeds}")
    if first_seed < 0:
        fail(f"--first-seed: expected a seed >= 0, got {first_seed}")
    found = discover()
    for name, message in found.failures.items():
        console.print(f"error: could not load the scenarios of {name}: {message}", highlight=False, markup=False)
    try:
        scenarios = select(found.scenarios, only, suite)
    except SelectionError as err:
        fail(str(err))
    if list_:
        table = Table("scenario", "package", "method", "variants", "description")
        for s in scenarios:
            table.add_row(s.name, s.package, s.method, ", ".join(s.variants), s.description)
        console.print(table)
        return
    if not scenarios:
        fail(f"no scenario has a {suite!r} variant")
    torch_device = _device(device)
    out_dir = out or Path("results") / datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    data_root = fd.root(required=False)
    versions = {**member_versions(), **library_versions()}
    commit = git_commit()
    records: list[Record] = []
    jsonl = (out_dir / "results.jsonl").open("w")
    progress = Progress(
        TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )
    task = progress.add_task("bench", total=len(scenarios) * seeds)
    current: dict[str, str | None] = {"name": None}

    with Live(Group(_table(records, None), progress), console=console, refresh_per_second=4) as live:

        def on_start(scenario, seed) -> None:
            current["name"] = f"{scenario.name} (seed {seed})"
            live.update(Group(_table(records, current["name"]), progress))

        def on_record(rec: Record) -> None:
            records.append(rec)
            jsonl.write(json.dumps(rec.to_json()) + "\n")
            jsonl.flush()
            progress.advance(task)
            live.update(Group(_table(records, None), progress))

        run_all(
            scenarios,
            seeds=list(range(first_seed, first_seed + seeds)),
            variant=suite,
            device=torch_device,
            out_dir=out_dir,
            data_root=data_root,
            versions=versions,
            git_commit=commit,
            on_start=on_start,
            on_record=on_record,
        )
    jsonl.close()
    report = write_report([r.to_json() for r in records], out_dir)
    console.print(f"wrote {out_dir / 'results.jsonl'}, {report} and {out_dir / 'plots'}", highlight=False)
    errors = [r for r in records if r.status == "error"]
    for rec in errors:
        console.print(f"[red]error[/red] {rec.name} seed {rec.seed}: {rec.message}", highlight=False)
    if errors or found.failures:
        raise typer.Exit(1)


@app.command("report")
def report(folder: Path = typer.Argument(..., help="A results folder holding results.jsonl.")) -> None:
    """Re-render report.md and the plots from a results folder."""
    try:
        records = load_records(folder)
    except FileNotFoundError as err:
        fail(str(err))
    console.print(f"wrote {write_report(records, folder)}", highlight=False)


os.environ.setdefault("MPLBACKEND", "Agg")
