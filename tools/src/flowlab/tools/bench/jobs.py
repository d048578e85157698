"""Running (scenario, seed) cases in worker processes: `--jobs N`, each worker with its share of the CPU threads.

A case runs the same code in a worker as in the runner's own process (`run_one` with a seeded generator), so its
seeded metrics do not depend on which process runs it, provided the scenario fixes its own thread count (the runner
gives each worker `cores // N` threads; one process keeps torch's default).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from flowlab.core.processes import spawn_pool

__all__ = ["Case", "available_cores", "default_jobs", "run_cases"]


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


def run_cases(
    cases: Iterable[Case], *, jobs: int, on_start: Callable[[Case], None] | None = None
) -> Iterator[tuple[Case, dict[str, Any]]]:
    """Yield (case, record as JSON) as the cases finish, in `jobs` spawned workers of cores // jobs threads each
    (`spawn_pool`: a runner killed by a signal takes its workers with it)."""
    cases = list(cases)
    threads = max(1, available_cores() // jobs)
    with spawn_pool(jobs, initializer=_init_worker, initargs=(threads,)) as pool:
        pending: dict[Future, Case] = {}
        queue = iter(cases)
        for case in queue:
            if on_start is not None:
                on_start(case)
            pending[pool.submit(_run_case, case)] = case
            if len(pending) >= jobs:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                case = pending.pop(future)
                yield case, future.result()
                nxt = next(queue, None)
                if nxt is not None:
                    if on_start is not None:
                        on_start(nxt)
                    pending[pool.submit(_run_case, nxt)] = nxt
