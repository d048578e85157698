"""Run scenarios seed by seed, in this process or in `--jobs` workers, after building the artifacts they need once;
record metrics, baselines, the claim's verdict, wall time and peak memory."""

from __future__ import annotations

import math
import resource
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from flowlab.core.artifacts import Artifact, CorruptArtifactWarning, ensure
from flowlab.core.bench import BenchContext, BenchResult, Curve, DataMissing, Scenario, warm_up_torch
from flowlab.tools.bench.jobs import Case, run_cases

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


@dataclass
class Record:
    """One (scenario, seed) outcome, or one artifact build (`kind` "artifact"): one line of results.jsonl."""

    name: str
    package: str
    method: str
    variant: str
    seed: int
    status: str  # "ok" | "skipped" | "error"
    message: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    baselines: dict[str, dict[str, float]] = field(default_factory=dict)
    ratios: dict[str, dict[str, float]] = field(default_factory=dict)
    references: dict[str, dict[str, float]] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)
    nfe: dict[str, int] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)
    curves: list[dict[str, Any]] = field(default_factory=list)
    wall_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    device: str = "cpu"
    config: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    git_commit: str | None = None
    kind: str = "scenario"  # "scenario" | "artifact"
    headline: bool = False
    claim: dict[str, Any] | None = None  # the Claim's fields, its value on this seed and whether it held
    expected_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _reset_peak_rss() -> bool:
    """Reset the kernel's high-water mark of this process (Linux); False where unsupported."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def _peak_rss_mb(reset_worked: bool) -> float:
    if reset_worked:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # process peak so far (KiB on Linux)


def _floats(metrics: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in metrics.items()}


def _curve_json(curve: Curve) -> dict[str, Any]:
    lines = {label: [[float(v) for v in xs], [float(v) for v in ys]] for label, (xs, ys) in curve.lines.items()}
    return {**asdict(curve), "lines": lines}


def ratios(metrics: Mapping[str, float], baselines: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """ours / baseline for every metric both report (nan where the baseline is 0)."""
    out: dict[str, dict[str, float]] = {}
    for base, values in baselines.items():
        shared = {k: metrics[k] / values[k] if values[k] else math.nan for k in metrics if k in values}
        if shared:
            out[base] = shared
    return out


def run_one(
    scenario: Scenario,
    *,
    seed: int,
    variant: str,
    device: torch.device,
    out_dir: Path,
    data_root: Path | None,
    versions: Mapping[str, str] | None = None,
    git_commit: str | None = None,
) -> Record:
    """Run one scenario variant with one seed; exceptions become an "error" record, missing data a "skipped" one."""
    config = scenario.variants[variant]
    scenario_dir = out_dir / scenario.name / f"seed{seed}"
    scenario_dir.mkdir(parents=True, exist_ok=True)
    record = Record(
        name=scenario.name,
        package=scenario.package,
        method=scenario.method,
        variant=variant,
        seed=seed,
        status="ok",
        directions=dict(scenario.directions),
        device=str(device),
        config=config.to_dict(),
        versions=dict(versions or {}),
        git_commit=git_commit,
        headline=scenario.headline,
        expected_seconds=scenario.expected(variant),
    )
    torch.manual_seed(seed)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    ctx = BenchContext(
        seed=seed,
        variant=variant,
        config=config,
        device=device,
        generator=generator,
        out_dir=scenario_dir,
        data_root=data_root,
    )
    reset = _reset_peak_rss()
    start = time.perf_counter()
    try:
        result = scenario.run(ctx)
        if not isinstance(result, BenchResult):
            raise TypeError(f"scenario returned {type(result).__name__}, expected BenchResult")
    except DataMissing as err:
        record.status, record.message = "skipped", f"skipped: {err}"
    except Exception as err:  # a failing scenario is reported and the run continues
        record.status = "error"
        record.message = f"{type(err).__name__}: {err}"
        record.config["traceback"] = traceback.format_exc(limit=8)
    else:
        record.metrics = _floats(result.metrics)
        record.baselines = {k: _floats(v) for k, v in result.baselines.items()}
        record.references = {k: _floats(v) for k, v in result.references.items()}
        record.ratios = ratios(record.metrics, record.baselines)
        record.nfe = {k: int(v) for k, v in result.nfe.items()}
        record.plots = [str(Path(p)) for p in result.plots]
        record.curves = [_curve_json(c) for c in result.curves]
        if scenario.claim is not None:
            value = scenario.claim.value(record.metrics, record.baselines)
            record.claim = {**asdict(scenario.claim), "value": value, "held": scenario.claim.holds(value)}
    record.wall_seconds = time.perf_counter() - start
    record.peak_rss_mb = _peak_rss_mb(reset)
    return record


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
    """Build the artifacts the scenarios need (a row each), then run every (scenario, seed): in this process for
    `jobs` 1, else in `jobs` spawned workers (see `jobs.run_cases`). `on_start(name, seed)` fires as a case starts
    (seed -1 for an artifact), `on_record` as each row is ready; rows come in completion order."""
    records: list[Record] = []

    def emit(rec: Record) -> None:
        records.append(rec)
        if on_record is not None:
            on_record(rec)

    warm_up_torch()
    for artifact in required_artifacts(scenarios, variant, device):
        if on_start is not None:
            on_start(artifact.name, -1)
        emit(build_artifact(artifact, versions=versions))
    if jobs > 1:
        cases = [
            Case(s.name, seed, variant, str(device), str(out_dir), None if data_root is None else str(data_root),
                 dict(versions or {}), git_commit)
            for s in scenarios
            for seed in seeds
        ]  # fmt: skip
        starting = None if on_start is None else (lambda case: on_start(case.name, case.seed))
        for _, row in run_cases(cases, jobs=jobs, on_start=starting):
            emit(Record(**row))
        return records
    for scenario in scenarios:
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
