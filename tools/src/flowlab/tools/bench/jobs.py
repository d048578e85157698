"""Work in worker processes: the (scenario, seed) cases of `--jobs N`, each worker with its share of the CPU threads,
and the artifact builds, one per core.

A case runs the same code in a worker as in the runner's own process (`run_one` with a seeded generator), so its
seeded metrics do not depend on which process runs it, provided the scenario fixes its own thread count (the runner
gives each worker `cores // N` threads; one process keeps torch's default). An artifact build always runs on its
artifact's threads (`Artifact.threads`; the runner sends only one-thread builds here), so its bytes do not depend on
where it ran either.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from flowlab.core.artifacts import Artifact
from flowlab.core.processes import spawn_pool

__all__ = ["Build", "Case", "available_cores", "build_workers", "default_jobs", "run_builds", "run_cases"]

T = TypeVar("T")


@dataclass(frozen=True)
class Case:
    """One unit of work: a scenario (by name), a seed and a variant, with what `run_one` needs besides."""

    name: str
    seed: int
    variant: str
    device: str
    out_dir: str
    data_root: str | None
    versions: dict[str, str]
    git_commit: str | None


def available_cores() -> int:
    """The CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_jobs(cores: int | None = None) -> int:
    """1 on a machine of up to 2 cores, else cores // 2 (a worker per pair of cores)."""
    cores = available_cores() if cores is None else cores
    return 1 if cores <= 2 else cores // 2


@dataclass(frozen=True)
class Build:
    """One artifact to ensure in the cache, with the library versions its row records."""

    artifact: Artifact
    versions: dict[str, str]


def build_workers(missing: int, cores: int | None = None) -> int:
    """Processes that build `missing` one-thread artifacts side by side: one per core, at most one per artifact."""
    cores = available_cores() if cores is None else cores
    return max(1, min(cores, missing))


_SCENARIOS: dict[str, Any] = {}


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)
    os.environ.setdefault("MPLBACKEND", "Agg")


def _run_case(case: Case) -> dict[str, Any]:
    from flowlab.core.bench import warm_up_torch
    from flowlab.tools.bench.case import run_one
    from flowlab.tools.bench.discovery import discover

    if not _SCENARIOS:
        warm_up_torch()
        _SCENARIOS.update({s.name: s for s in discover().scenarios})
    record = run_one(
        _SCENARIOS[case.name],
        seed=case.seed,
        variant=case.variant,
        device=torch.device(case.device),
        out_dir=Path(case.out_dir),
        data_root=None if case.data_root is None else Path(case.data_root),
        versions=case.versions,
        git_commit=case.git_commit,
    )
    return record.to_json()


def _build(build: Build) -> dict[str, Any]:
    from flowlab.tools.bench.runner import build_artifact

    return build_artifact(build.artifact, versions=build.versions).to_json()


def _in_workers(
    items: Iterable[T],
    fn: Callable[[T], dict[str, Any]],
    *,
    workers: int,
    threads: int,
    on_start: Callable[[T], None] | None,
) -> Iterator[tuple[T, dict[str, Any]]]:
    """Yield (item, fn(item)) as they finish, in `workers` spawned processes of `threads` torch threads each, the
    items started in the given order (`spawn_pool`: a runner killed by a signal takes its workers with it)."""
    with spawn_pool(workers, initializer=_init_worker, initargs=(threads,)) as pool:
        pending: dict[Future, T] = {}
        queue = iter(items)

        def submit(item: T) -> None:
            if on_start is not None:
                on_start(item)
            pending[pool.submit(fn, item)] = item

        for item in queue:
            submit(item)
            if len(pending) >= workers:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                yield item, future.result()
                nxt = next(queue, None)
                if nxt is not None:
                    submit(nxt)


def run_cases(
    cases: Iterable[Case], *, jobs: int, threads: int | None = None, on_start: Callable[[Case], None] | None = None
) -> Iterator[tuple[Case, dict[str, Any]]]:
    """Yield (case, record as JSON) as the cases finish, in `jobs` spawned workers of `threads` torch threads each
    (default cores // jobs)."""
    threads = max(1, available_cores() // jobs) if threads is None else threads
    yield from _in_workers(cases, _run_case, workers=jobs, threads=threads, on_start=on_start)


def run_builds(
    builds: Iterable[Build], *, workers: int, on_start: Callable[[Build], None] | None = None
) -> Iterator[tuple[Build, dict[str, Any]]]:
    """Yield (build, its row as JSON) as the builds finish, in `workers` spawned processes of one thread each, started
    in the given order (the runner gives the longest first)."""
    yield from _in_workers(builds, _build, workers=workers, threads=1, on_start=on_start)
