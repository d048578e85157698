"""`flowlab bench`: plan, build the shared artifacts once, run the suite's scenarios (in `--jobs` workers), write
results.jsonl, report.md, report.html and plots."""

from __future__ import annotations

import json
import os
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    import torch

    from flowlab.core.bench import Scenario
    from flowlab.tools.bench.case import Record

app = typer.Typer(help="Benchmarks: every method against its baselines, in one run.", invoke_without_command=True)
console = Console()
_STATUS_STYLE = {"ok": "green", "skipped": "yellow", "error": "red"}


def fail(message: str) -> None:
    """Print a one-line error and exit 2 (a bad invocation)."""
    console.print(f"error: {message}", highlight=False, markup=False)
    raise typer.Exit(2)


def _device(name: str) -> torch.device:
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        fail(f"--device: unknown device {name!r}; expected auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        fail("--device: CUDA was requested but no CUDA device is available")
    return device


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _suites(s: Scenario) -> str:
    tags = [("d" if s.headline else "-"), *(v[0] if v in s.variants else "-" for v in ("smoke", "quick", "full"))]
    return "".join(tags)


def print_list(scenarios: list[Scenario], *, verbose: bool) -> None:
    """One line per scenario within 80 columns: name, method, suites (d = default, s/q/f = smoke, quick, full),
    the expected time of one quick seed; `verbose` adds the description, wrapped."""
    console.print(f"{'scenario':<32} {'method':<16} {'suites':<7} {'quick':>8}", highlight=False)
    for s in scenarios:
        console.print(f"{s.name[:32]:<32} {s.method[:16]:<16} {_suites(s):<7} {_minutes(s.expected('quick')):>8}",
                      highlight=False)  # fmt: skip
        if verbose and s.description:
            console.print(textwrap.indent(textwrap.fill(s.description, 76), "    "), highlight=False, markup=False)
    console.print("suites: d default, s smoke, q quick, f full", highlight=False)


def _makespan(seconds: list[float], workers: int) -> float:
    """The wall time of jobs of these lengths started longest first, each on the first free of `workers`."""
    loads = [0.0] * workers
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


def _shared_makespan(seconds: list[float], jobs: int, cores: int) -> float:
    """`_makespan` of these cases on `jobs` workers, stretched where more workers run at once than there are cores."""
    if not seconds:
        return 0.0
    busy = min(jobs, len(seconds))
    return _makespan(seconds, busy) * busy / min(busy, cores)


def print_plan(
    scenarios: list[Scenario], *, suite: str, seeds: list[int], jobs: int, device: torch.device
) -> tuple[float, int]:
    """What will run, how long each is expected to take, which artifacts are cached and which will be built (those
    that declare several threads alone first, then the one-thread builds side by side, one per core; the seeds on
    `jobs` workers, which share the cores where there are fewer); returns the expected wall seconds and how many
    artifacts build at a time."""
    import torch

    from flowlab.core.artifacts import is_cached
    from flowlab.core.bench import SUITES
    from flowlab.tools.bench.jobs import available_cores, build_workers
    from flowlab.tools.bench.runner import required_artifacts, side_by_side

    variant = SUITES[suite]
    artifacts = required_artifacts(scenarios, variant, device)
    table = Table("", "name", "", "expected", title=f"plan: suite {suite} ({variant} variants)", title_justify="left")
    alone: list[float] = []  # several threads each: built one after another
    to_build: list[float] = []  # one thread each: side by side
    for a in artifacts:
        cached = is_cached(a)
        if not cached:
            (alone if a.threads > 1 else to_build).append(a.expected_seconds)
        table.add_row("artifact", a.name, "cached" if cached else "[yellow]build[/yellow]",
                      "–" if cached else _minutes(a.expected_seconds))  # fmt: skip
    paired = side_by_side(scenarios, seeds, device, jobs)  # one-thread scenarios run side by side, first
    beside = [s.expected(variant) for s in scenarios if paired and s.single_thread for _ in seeds]
    cases = [s.expected(variant) for s in scenarios if not (paired and s.single_thread) for _ in seeds]
    for s in scenarios:
        table.add_row("scenario", s.name, f"seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}",
                      _minutes(s.expected(variant) * len(seeds)))  # fmt: skip
    console.print(table)
    workers = build_workers(len(to_build))
    build = sum(alone) + (_makespan(to_build, workers) if to_build else 0.0)
    total = build + _shared_makespan(cases, jobs, available_cores()) + (_makespan(beside, paired) if paired else 0.0)
    building = ""
    if build:
        side = f"{len(to_build)} on {workers} worker(s)"
        if alone and to_build:
            what = f"{len(alone)} alone, then {side}"
        elif alone:
            what = f"{len(alone)} one after another"
        else:
            what = side
        building = f" ({_minutes(build)} of it building artifacts: {what})"
    console.print(
        f"{len(scenarios)} scenario(s) x {len(seeds)} seed(s) on {device}, {jobs} job(s) of "
        f"{torch.get_num_threads() if jobs == 1 else max(1, available_cores() // jobs)} thread(s): about "
        f"{_minutes(total)}{building}",
        highlight=False,
    )
    return total, workers


def _headline(rec: Record) -> str:
    if rec.status != "ok":
        return rec.message[:90]
    if rec.kind == "artifact":
        return rec.message
    if rec.claim is not None and rec.claim["value"] is not None:
        verdict = {True: "holds", False: "does not hold", None: "–"}[rec.claim["held"]]
        return f"{rec.claim['metric']}={rec.claim['value']:.3g}: claim {verdict}"
    return ", ".join(f"{k}={v:.3g}" for k, v in list(rec.metrics.items())[:3])


class _Progress:
    """The live table: finished rows, what is running, and an ETA from the expected times scaled by how fast the
    finished cases ran against theirs."""

    def __init__(self, total_expected: float, jobs: int, builders: int) -> None:
        self.records: list[Record] = []
        self.running: dict[tuple[str, int], float] = {}
        self.remaining, self.jobs, self.builders = total_expected, jobs, builders
        self.spent = self.expected_done = 0.0
        self.start = time.perf_counter()

    def render(self) -> Group:
        table = Table("row", "seed", "status", "wall s", "headline", expand=False)
        for rec in self.records:
            style = _STATUS_STYLE[rec.status]
            seed = "" if rec.kind == "artifact" else str(rec.seed)
            table.add_row(rec.name, seed, f"[{style}]{rec.status}[/{style}]", f"{rec.wall_seconds:.1f}", _headline(rec))
        for name, seed in self.running:
            table.add_row(name, "" if seed < 0 else str(seed), "[cyan]running[/cyan]", "", "")
        pace = self.spent / self.expected_done if self.expected_done > 0 else 1.0
        elapsed = time.perf_counter() - self.start
        eta = Text(f"elapsed {_minutes(elapsed)}, about {_minutes(max(0.0, self.remaining * pace))} to go", "bold")
        return Group(table, eta)

    def started(self, name: str, seed: int) -> None:
        self.running[(name, seed)] = time.perf_counter()

    def finished(self, rec: Record) -> None:
        self.running.pop((rec.name, -1 if rec.kind == "artifact" else rec.seed), None)
        self.records.append(rec)
        expected = rec.expected_seconds if (rec.kind != "artifact" or rec.message.startswith("built")) else 0.0
        share = expected / (self.builders if rec.kind == "artifact" else self.jobs)
        self.remaining = max(0.0, self.remaining - share)
        if expected > 0 and rec.status == "ok":
            self.spent += rec.wall_seconds
            self.expected_done += expected


@app.callback()
def bench(
    ctx: typer.Context,
    suite: str = typer.Option(
        "default", "--suite", help="default (each method's headline case, quick size), smoke, quick or full."
    ),
    only: list[str] = typer.Option(
        None, "--only", help="Scenario name, dotted prefix, substring or glob (repeatable)."
    ),
    list_: bool = typer.Option(False, "--list", help="List the selected scenarios and exit."),
    verbose: bool = typer.Option(False, "--verbose", help="With --list: each scenario's description."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan (times, artifacts to build) and exit."),
    prewarm: bool = typer.Option(False, "--prewarm", help="Build the selected scenarios' artifacts and exit."),
    jobs: int = typer.Option(
        None, "--jobs", help="Worker processes for scenarios and seeds (default: 1 on 2 cores, else cores // 2)."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    seeds: int = typer.Option(1, "--seeds", help="Number of seeds per scenario (seeds 0..N-1)."),
    first_seed: int = typer.Option(
        0, "--first-seed", help="First seed: K runs seeds K..K+N-1 (to add seeds to an earlier run)."
    ),
    out: Path = typer.Option(None, "--out", help="Output folder (default results/<timestamp>)."),
) -> None:
    """Run a suite of scenarios (the `default` one unless told) and write results.jsonl, report.md, report.html."""
    if ctx.invoked_subcommand is not None:
        return
    import flowlab.datasets as fd
    from flowlab.core.bench import SUITES
    from flowlab.tools.bench.discovery import SelectionError, check_suite, discover, select
    from flowlab.tools.bench.jobs import default_jobs
    from flowlab.tools.bench.report import write_report
    from flowlab.tools.bench.runner import build_artifacts, required_artifacts, run_all
    from flowlab.tools.versions import git_commit, library_versions, member_versions

    try:
        check_suite(suite)
    except SelectionError as err:
        fail(str(err))
    if seeds < 1:
        fail(f"--seeds: expected a positive number of seeds, got {seeds}")
    if first_seed < 0:
        fail(f"--first-seed: expected a seed >= 0, got {first_seed}")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        fail(f"--jobs: expected at least 1 worker, got {jobs}")
    if out is not None and (out.is_file() or (out / "results.jsonl").exists()):
        fail(f"--out: {out} is a file or already holds a run's results.jsonl; choose another folder")
    found = discover()
    for name, message in found.failures.items():
        console.print(f"error: could not load the scenarios of {name}: {message}", highlight=False, markup=False)
    try:
        # --list shows every scenario (its suites column marks the default ones) unless a suite is named
        scenarios = select(found.scenarios, only, "quick" if list_ and suite == "default" else suite)
    except SelectionError as err:
        fail(str(err))
    if list_:
        print_list(scenarios, verbose=verbose)
        return
    if not scenarios:
        fail(f"no scenario has a {SUITES[suite]!r} variant in suite {suite!r}")
    torch_device = _device(device)
    seed_list = list(range(first_seed, first_seed + seeds))
    total, builders = print_plan(scenarios, suite=suite, seeds=seed_list, jobs=jobs, device=torch_device)
    if dry_run:
        return
    versions = {**member_versions(), **library_versions()}
    if prewarm:
        failed = False
        for rec in build_artifacts(required_artifacts(scenarios, SUITES[suite], torch_device), versions=versions):
            console.print(f"{rec.name}: {rec.status} {rec.message} ({rec.wall_seconds:.1f} s)", highlight=False)
            failed |= rec.status == "error"
        raise typer.Exit(1 if failed else 0)
    out_dir = out or Path("results") / datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    progress = _Progress(total, jobs, builders)
    with (out_dir / "results.jsonl").open("w") as jsonl, Live(progress.render(), console=console,
                                                                refresh_per_second=2) as live:  # fmt: skip

        def on_start(name: str, seed: int) -> None:
            progress.started(name, seed)
            live.update(progress.render())

        def on_record(rec: Record) -> None:
            jsonl.write(json.dumps(rec.to_json()) + "\n")
            jsonl.flush()
            progress.finished(rec)
            live.update(progress.render())

        records = run_all(
            scenarios,
            seeds=seed_list,
            variant=SUITES[suite],
            device=torch_device,
            out_dir=out_dir,
            data_root=fd.root(required=False),
            versions=versions,
            git_commit=git_commit(),
            jobs=jobs,
            on_start=on_start,
            on_record=on_record,
        )
    elapsed = time.perf_counter() - progress.start
    report = write_report([r.to_json() for r in records], out_dir, suite=suite, elapsed=elapsed)
    console.print(f"wrote {out_dir / 'results.jsonl'}, {report}, {report.with_suffix('.html')}", highlight=False)
    errors = [r for r in records if r.status == "error"]
    for rec in errors:
        console.print(f"[red]error[/red] {rec.name} seed {rec.seed}: {rec.message}", highlight=False)
    if errors or found.failures:
        raise typer.Exit(1)


@app.command("report")
def report(folder: Path = typer.Argument(..., help="A results folder holding results.jsonl.")) -> None:
    """Re-render report.md, report.html and the plots from a results folder."""
    from flowlab.tools.bench.report import load_records, write_report

    try:
        records = load_records(folder)
    except (FileNotFoundError, ValueError) as err:
        fail(f"FOLDER: {err}")
    console.print(f"wrote {write_report(records, folder)}", highlight=False)


os.environ.setdefault("MPLBACKEND", "Agg")
