"""Run scenarios seed by seed, in this process or in `--jobs` workers, after building the artifacts they need once
(side by side, one per core); record metrics, baselines, the claim's verdict, wall time and peak memory."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import torch

from flowlab.core.artifacts import Artifact, CorruptArtifactWarning, ensure, is_cached
from flowlab.core.bench import DataMissing, Scenario, warm_up_torch
from flowlab.tools.bench.case import Record, run_one
from flowlab.tools.bench.jobs import Build, Case, available_cores, build_workers, run_builds, run_cases


def required_artifacts(scenarios: Sequence[Scenario], variant: str, device: torch.device) -> list[Artifact]:
    """Every artifact the scenarios' `variant` needs, once each (by cache key), in first-needed order."""
    found: dict[tuple[str, str], Artifact] = {}
    for scenario in scenarios:
        for artifact in scenario.requires(scenario.variants[variant], device):
            found.setdefault((artifact.name, artifact.key()), artifact)
    return list(found.values())


def build_artifact(artifact: Artifact, *, versions: Mapping[str, str] | None = None) -> Record:
    """Ensure one artifact is in the cache; its row: "built" (with the build's seconds) or "cached", a rebuilt
    corrupt entry named in the message, or "error"."""
    record = Record(
        name=artifact.name,
        package=artifact.name.split(".")[0],
        method="artifact",
        variant="-",
        seed=0,
        status="ok",
        kind="artifact",
        config=artifact.config.to_dict(),
        versions=dict(versions or {}),
        expected_seconds=artifact.expected_seconds,
    )
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CorruptArtifactWarning)
            entry = ensure(artifact)
    except DataMissing as err:
        record.status, record.message = "skipped", f"skipped: {err}"
    except Exception as err:  # a failing build is reported; the scenarios needing it then fail on their own
        record.status, record.message = "error", f"{type(err).__name__}: {err}"
    else:
        corrupt = [str(w.message) for w in caught if issubclass(w.category, CorruptArtifactWarning)]
        record.message = ("built" if entry.built else "cached") + (f" ({'; '.join(corrupt)})" if corrupt else "")
        record.metrics = {"build_seconds": entry.seconds}
        record.config["path"] = str(entry.path)
    record.wall_seconds = time.perf_counter() - start
    return record


def build_artifacts(
    artifacts: Sequence[Artifact],
    *,
    versions: Mapping[str, str] | None = None,
    on_start: Callable[[str, int], None] | None = None,
) -> Iterator[Record]:
    """Every artifact's row (`build_artifact`), as each is ready: the cached ones checked here, then the missing
    ones longest first: those that declare several threads here, one after another, then the one-thread builds side
    by side in `build_workers` processes when there are several cores and several to build. A build's bytes do not
    depend on where it ran (it runs on its artifact's threads). `on_start(name, -1)` fires as each starts."""
    versions = dict(versions or {})
    cached, wide, narrow = [], [], []
    for artifact in artifacts:
        (cached if is_cached(artifact) else wide if artifact.threads > 1 else narrow).append(artifact)
    wide.sort(key=lambda a: -a.expected_seconds)
    narrow.sort(key=lambda a: -a.expected_seconds)
    workers = build_workers(len(narrow))
    for artifact in cached + wide + (narrow if workers == 1 else []):
        if on_start is not None:
            on_start(artifact.name, -1)
        yield build_artifact(artifact, versions=versions)
    if workers > 1:
        starting = None if on_start is None else (lambda build: on_start(build.artifact.name, -1))
        builds = [Build(a, versions) for a in narrow]
        for _, row in run_builds(builds, workers=workers, on_start=starting):
            yield Record(**row)


def side_by_side(scenarios: Sequence[Scenario], seeds: Sequence[int], device: torch.device, jobs: int) -> int:
    """How many worker processes run the `single_thread` scenarios' cases side by side, one thread each, when the
    runner is otherwise serial (`jobs` 1, CPU, several cores, at least two such cases); 0: none (all serial)."""
    cases = sum(len(seeds) for s in scenarios if s.single_thread)
    if jobs != 1 or device.type != "cpu" or cases < 2:
        return 0
    workers = min(available_cores(), cases)
    return workers if workers > 1 else 0


def run_all(
    scenarios: Sequence[Scenario],
    *,
    seeds: Sequence[int],
    variant: str,
    device: torch.device,
    out_dir: Path,
    data_root: Path | None,
    versions: Mapping[str, str] | None = None,
    git_commit: str | None = None,
    jobs: int = 1,
    on_start: Callable[[str, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> list[Record]:
    """Build the artifacts the scenarios need (a row each, `build_artifacts`), then run every (scenario, seed): in
    this process for `jobs` 1, else in `jobs` spawned workers (see `jobs.run_cases`). With `jobs` 1 the cases of
    `single_thread` scenarios run first, side by side in one-thread workers (`side_by_side`). Seeded metrics are
    those of one process either way. `on_start(name, seed)` fires as a case starts (seed -1 for an artifact),
    `on_record` as each row is ready; rows come in completion order."""
    records: list[Record] = []

    def emit(rec: Record) -> None:
        records.append(rec)
        if on_record is not None:
            on_record(rec)

    def cases(chosen: Sequence[Scenario]) -> list[Case]:
        return [Case(s.name, seed, variant, str(device), str(out_dir), None if data_root is None else str(data_root),
                     dict(versions or {}), git_commit)
                for s in chosen for seed in seeds]  # fmt: skip

    warm_up_torch()
    for row in build_artifacts(required_artifacts(scenarios, variant, device), versions=versions, on_start=on_start):
        emit(row)
    starting = None if on_start is None else (lambda case: on_start(case.name, case.seed))
    if jobs > 1:
        for _, row in run_cases(cases(scenarios), jobs=jobs, on_start=starting):
            emit(Record(**row))
        return records
    paired = side_by_side(scenarios, seeds, device, jobs)
    if paired:  # the longest first, as the plan's makespan assumes
        alone = sorted((s for s in scenarios if s.single_thread), key=lambda s: -s.expected(variant))
        for _, row in run_cases(cases(alone), jobs=paired, threads=1, on_start=starting):
            emit(Record(**row))
    for scenario in scenarios:
        if paired and scenario.single_thread:
            continue
        for seed in seeds:
            if on_start is not None:
                on_start(scenario.name, seed)
            emit(
                run_one(
                    scenario,
                    seed=seed,
                    variant=variant,
                    device=device,
                    out_dir=out_dir,
                    data_root=data_root,
                    versions=versions,
                    git_commit=git_commit,
                )
            )
    return records
