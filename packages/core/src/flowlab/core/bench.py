"""The benchmark protocol: a `Scenario` runs our method and its baselines in one process and returns a `BenchResult`.

Packages register a tuple of scenarios under the entry point group `flowlab.benchmarks`; the `flowlab bench`
runner discovers, runs and reports them. Names are `<pkg>.<method>.<case>`.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch

from flowlab.core.artifacts import Artifact
from flowlab.core.config import Config
from flowlab.core.processes import spawn_pool
from flowlab.core.threads import torch_threads

__all__ = [
    "INFRASTRUCTURE",
    "SUITES",
    "BenchContext",
    "BenchResult",
    "Claim",
    "Curve",
    "DataMissing",
    "Job",
    "Scenario",
    "Timer",
    "figure",
    "name_seed",
    "parallel_jobs",
    "parallel_map",
    "peak_memory",
    "require_file",
    "seeded_worker",
    "torch_threads",
    "warm_up_torch",
    "worker_pool",
]

PACKAGE_PREFIXES = ("core", "vision", "mol", "rl", "bio", "crowd", "trust", "tools")
#: suite -> the variant it runs: smoke (every scenario, toy size, CI), default (each method's headline case at quick
#: size: what `flowlab bench` runs), quick (every scenario), cpu (the scenarios with a `cpu` variant: what a claim needs
#: on a 2-core CPU where quick is too short, up to an hour each), full (paper-shaped, sized for a GPU)
SUITES = {"smoke": "smoke", "default": "quick", "quick": "quick", "cpu": "cpu", "full": "full"}
#: the tag of a scenario that measures shared infrastructure (the vision kit's teachers, the CLI), not a method: it
#: has no headline case, so the default suite leaves it out; `--suite quick` runs it
INFRASTRUCTURE = "infrastructure"
_OPS = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b}


class DataMissing(FileNotFoundError):
    """A scenario's data file is absent: the runner reports the scenario as skipped with this message."""


@dataclass(frozen=True)
class BenchContext:
    """What a scenario receives: its seed, variant name and typed config, the device, a seeded generator, folders."""

    seed: int
    variant: str
    config: Config  # an instance of the scenario's own Config subclass
    device: torch.device
    generator: torch.Generator
    out_dir: Path
    data_root: Path | None


@dataclass(frozen=True)
class Curve:
    """A line plot the runner draws (so scenarios need no plotting library): label -> (xs, ys)."""

    title: str
    xlabel: str
    ylabel: str
    lines: Mapping[str, tuple[Sequence[float], Sequence[float]]]
    logx: bool = False
    logy: bool = False


@dataclass(frozen=True)
class BenchResult:
    """Our metrics, each baseline's metrics (measured in the same run) and published reference numbers.

    `references` keys read "<method> [paper|code|unverified]". `plots` are PNG paths under `out_dir`; `curves` are
    line plots for the runner to draw; `nfe` counts network evaluations where they matter.
    """

    metrics: Mapping[str, float]
    baselines: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    references: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    plots: Sequence[Path] = ()
    curves: Sequence[Curve] = ()
    nfe: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Claim:
    """The paper's claim a scenario checks, read off one of our metrics: `metric` (or, with `baseline`, its ratio
    to that baseline's value) compared by `op` with `threshold`; e.g. Claim("one step within 1/5 of RFM's MMD",
    "volcano/mmd_nfe1", "<=", 0.2, baseline="RFM")."""

    text: str
    metric: str
    op: Literal["<=", ">=", "<", ">"]
    threshold: float
    baseline: str | None = None

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"op: expected one of {sorted(_OPS)}, got {self.op!r}")

    def value(self, metrics: Mapping[str, float], baselines: Mapping[str, Mapping[str, float]]) -> float | None:
        """The number the claim compares (None when a seed did not report it)."""
        ours = metrics.get(self.metric)
        if ours is None:
            return None
        if self.baseline is None:
            return float(ours)
        theirs = baselines.get(self.baseline, {}).get(self.metric)
        return None if not theirs else float(ours) / float(theirs)

    def holds(self, value: float | None) -> bool | None:
        """Whether `value` (from `value`) meets the claim; None when there is nothing to judge."""
        return None if value is None else bool(_OPS[self.op](value, self.threshold))


def _no_artifacts(config: Config, device: torch.device) -> tuple[Artifact, ...]:
    return ()


@dataclass(frozen=True)
class Scenario:
    """One benchmark case. `variants` maps "quick" and "full" (and "smoke", the toy size CI runs) to instances of
    one frozen `Config` subclass, the scenario's typed settings (write `full` first and derive `quick = replace(full,
    ...)`). `expected_seconds`: the wall time of each variant on the 2-core CPU machine (full: on a GPU), for the
    runner's plan. `headline`: this is its method's headline case (the `default` suite; never for a scenario tagged
    `INFRASTRUCTURE`); `claim`: the paper's claim it checks, shown in the report's first table.
    `requires(config, device)`: the artifacts a variant uses on a device, which the runner builds once before any
    scenario runs (each reported on its own row). `single_thread`: on CPU every variant runs on one torch thread
    throughout (the scenario pins it), so the runner may run it beside another such scenario, each on its own core."""

    name: str
    package: str
    method: str
    run: Callable[[BenchContext], BenchResult]
    variants: Mapping[str, Config]
    directions: Mapping[str, Literal["min", "max"]]
    tags: frozenset[str] = frozenset()
    description: str = ""
    expected_seconds: Mapping[str, float] = field(default_factory=dict)
    headline: bool = False
    claim: Claim | None = None
    requires: Callable[[Config, torch.device], Sequence[Artifact]] = _no_artifacts
    single_thread: bool = False

    def __post_init__(self) -> None:
        parts = self.name.split(".")
        if len(parts) < 2 or parts[0] not in PACKAGE_PREFIXES:
            raise ValueError(
                f"name: expected '<pkg>.<method>.<case>' with pkg in {PACKAGE_PREFIXES}, got {self.name!r}"
            )
        missing = {"quick", "full"} - set(self.variants)
        if missing:
            raise ValueError(f"variants: scenario {self.name} lacks variant(s) {sorted(missing)}")
        types = {type(v) for v in self.variants.values()}
        if len(types) != 1 or not issubclass(next(iter(types)), Config):
            names = sorted(t.__name__ for t in types)
            raise ValueError(f"variants: scenario {self.name} needs instances of one Config subclass, got {names}")
        bad = {k: v for k, v in self.directions.items() if v not in ("min", "max")}
        if bad:
            raise ValueError(f"directions: expected 'min' or 'max', got {bad}")
        unknown = set(self.expected_seconds) - set(self.variants)
        if unknown:
            raise ValueError(f"expected_seconds: scenario {self.name} has no variant(s) {sorted(unknown)}")
        if any(not (isinstance(v, int | float) and v > 0) for v in self.expected_seconds.values()):
            raise ValueError(f"expected_seconds: expected positive seconds, got {dict(self.expected_seconds)}")
        if self.headline and INFRASTRUCTURE in self.tags:
            raise ValueError(f"headline: {self.name} is tagged {INFRASTRUCTURE!r}, not a method: it has no headline")
        if self.claim is not None and not isinstance(self.claim, Claim):
            raise ValueError(f"claim: expected a Claim, got {type(self.claim).__name__}")

    def expected(self, variant: str) -> float:
        """The expected wall seconds of one seed of `variant` (60 where the scenario does not say)."""
        return float(self.expected_seconds.get(variant, 60.0))


def require_file(data_root: Path | None, dataset: str, *parts: str) -> Path:
    """Path of `<data_root>/<dataset>/<parts...>`, or `DataMissing` naming the dataset, the file and FLOWLAB_DATA."""
    if data_root is None:
        raise DataMissing(f"{dataset} data set not found: FLOWLAB_DATA is not set - see the datasets README")
    path = Path(data_root, dataset, *parts)
    if not path.is_file():
        raise DataMissing(f"{dataset} data set not found: {path} (FLOWLAB_DATA={data_root})")
    return path


class Timer:
    """Wall-clock timer that synchronises CUDA before reading: `with Timer(device) as tm: ...; tm.seconds`."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.seconds = float("nan")

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __enter__(self) -> Timer:
        self._sync()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sync()
        self.seconds = time.perf_counter() - self._start


def peak_memory(fn: Callable[[], object], device: torch.device | str) -> int:
    """The peak bytes of tensor memory allocated while `fn()` runs, above what was allocated when it started.

    On CUDA: `torch.cuda.max_memory_allocated` after a reset of the peak statistics. Elsewhere: the running sum of
    the allocations and frees `torch.profiler` records (profile_memory=True), in time order; tensors only, not the
    allocator's caches or the interpreter (tracemalloc sees neither)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - start)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start)
    current = peak = 0
    for e in events:
        current += e.self_cpu_memory_usage
        peak = max(peak, current)
    return int(peak)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """Up to `workers` spawned processes (capped by the CPU cores) for several `parallel_map` calls in a row, so
    that the processes start and import once; None when the cap is 1 (`parallel_map` then runs in this process)."""
    if int(workers) < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    n = min(int(workers), _cores())
    if n == 1:
        yield None
        return
    with spawn_pool(n) as pool:
        yield pool


def parallel_map(
    fn: Callable[..., Any], *iterables: Iterable[Any], workers: int, pool: ProcessPoolExecutor | None = None
) -> list[Any]:
    """[fn(*args) for args in zip(*iterables)], in up to `workers` spawned processes (capped by the number of
    jobs and the CPU cores this process may use), or in this process with one torch thread when that cap is 1.
    `pool` (from `worker_pool`): run the jobs in its processes instead of starting new ones. `fn` and its arguments
    must pickle (a module-level function; no torch.Generator), and each job should seed itself so both paths give
    the same result."""
    if int(workers) < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    jobs = list(zip(*iterables, strict=True))
    n = max(1, min(len(jobs), int(workers), _cores()))
    if n == 1 or not jobs:
        with torch_threads(1):
            return [fn(*args) for args in jobs]
    if pool is not None:
        return list(pool.map(fn, *zip(*jobs, strict=True)))
    with spawn_pool(n) as fresh:
        return list(fresh.map(fn, *zip(*jobs, strict=True)))


@dataclass(frozen=True)
class Job:
    """One job of `parallel_jobs`: `fn(*args)`. `args` may instead be a function of the results of the jobs named
    in `after` ({name: result}), called in this process once they are all done; `cost` is the job's expected
    seconds (the longest ready job starts first)."""

    fn: Callable[..., Any]
    args: tuple | Callable[[Mapping[str, Any]], tuple] = ()
    after: tuple[str, ...] = ()
    cost: float = 0.0

    def call_args(self, done: Mapping[str, Any]) -> tuple:
        """The arguments of `fn`, given the finished results `done` (at least those of `after`)."""
        return tuple(self.args({a: done[a] for a in self.after})) if callable(self.args) else tuple(self.args)


def _check_jobs(jobs: Mapping[str, Job]) -> None:
    """Unknown `after` names and cycles are errors before anything runs."""
    for name, job in jobs.items():
        if not isinstance(job, Job):
            raise TypeError(f"job {name!r}: expected a Job, got {type(job).__name__}")
        unknown = [a for a in job.after if a not in jobs]
        if unknown:
            raise ValueError(f"job {name!r}: 'after' names no job {unknown}")
    resolved: set[str] = set()
    while len(resolved) < len(jobs):
        now = {n for n, j in jobs.items() if n not in resolved and all(a in resolved for a in j.after)}
        if not now:
            raise ValueError(f"jobs wait on each other in a cycle: {sorted(set(jobs) - resolved)}")
        resolved |= now


def parallel_jobs(jobs: Mapping[str, Job], *, workers: int, pool: ProcessPoolExecutor | None = None) -> dict[str, Any]:
    """{name: job.fn(*args)} for jobs that may wait on other jobs' results, in up to `workers` spawned processes
    (capped by the jobs and the CPU cores), or in this process with one torch thread when that cap is 1. Whenever a
    process is free, the ready job with the largest `cost` starts (ties: in the order of `jobs`), so a job runs as soon
    as its inputs exist and no process idles at a stage boundary. `pool`: a `worker_pool`'s processes. As with
    `parallel_map`, each job should seed itself, so the results do not depend on the order or the process."""
    if int(workers) < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    _check_jobs(jobs)
    done: dict[str, Any] = {}
    waiting = list(jobs)

    def next_ready() -> str | None:
        ready = [n for n in waiting if all(a in done for a in jobs[n].after)]
        return max(ready, key=lambda n: jobs[n].cost, default=None)  # max keeps the first of equal costs

    n = max(1, min(len(jobs), int(workers), _cores()))
    if n == 1:
        with torch_threads(1):
            while (name := next_ready()) is not None:
                waiting.remove(name)
                done[name] = jobs[name].fn(*jobs[name].call_args(done))
        return {name: done[name] for name in jobs}
    spawned = spawn_pool(n) if pool is None else None
    with nullcontext(pool) if spawned is None else spawned as executor:
        running: dict[Future, str] = {}
        while waiting or running:
            while len(running) < n and (name := next_ready()) is not None:
                waiting.remove(name)
                running[executor.submit(jobs[name].fn, *jobs[name].call_args(done))] = name
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done[running.pop(future)] = future.result()
    return {name: done[name] for name in jobs}


def name_seed(seed: int, name: str) -> int:
    """A seed for the part called `name` of a run seeded `seed` (e.g. one agent's initial weights): seed * 1000 plus
    the name's CRC-32 mod 1000, so it is the same whichever other parts run before it, in this process or another."""
    return seed * 1000 + zlib.crc32(name.encode()) % 1000


def seeded_worker(ctx: BenchContext, index: int) -> BenchContext:
    """Inside one `parallel_map` job: one torch thread and `ctx` with its own generator, seeded by (ctx.seed, index)
    as seed * 1000 + index, so the job's numbers do not depend on which process runs it."""
    torch.set_num_threads(1)
    return replace(ctx, generator=torch.Generator().manual_seed(ctx.seed * 1000 + index))


@contextmanager
def figure(
    path: str | os.PathLike[str],
    *,
    ncols: int = 1,
    nrows: int = 1,
    size: tuple[float, float] = (5.2, 3.6),
    dpi: int = 100,
    **subplots: Any,
) -> Iterator[tuple[Any, Any]]:
    """A matplotlib figure for a benchmark plot, saved to `path` (PNG) and closed on leaving the block:

        with figure(ctx.out_dir / "fes.png", ncols=3) as (fig, axes):
            axes[0].imshow(...)

    It draws on the Agg canvas (no display, no pyplot state) in the project's plot style (`plot_style.mplstyle`
    beside this module, or the style file `$FLOWLAB_PLOT_STYLE` names). `axes` is
    `fig.subplots(nrows, ncols, **subplots)`: one Axes or an array of them; `size` is the figure's (width, height) in
    inches."""
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    style = os.environ.get("FLOWLAB_PLOT_STYLE") or Path(__file__).with_name("plot_style.mplstyle")
    with matplotlib.style.context(style):
        fig = Figure(figsize=size)
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, **subplots)
        yield fig, axes
        fig.tight_layout()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)


def warm_up_torch() -> None:
    """Pay torch's one-time lazy costs before anything is timed: the first optimizer constructed in a process
    imports torch._dynamo (about 3 s on a 2-core CPU), which would otherwise land on whichever method trains
    first in a timing comparison."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([p])
    p.sum().backward()
    opt.step()
