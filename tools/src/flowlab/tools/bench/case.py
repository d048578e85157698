"""One case: run a scenario for one seed and variant and keep what it returned as a `Record` (metrics, baselines'
ratios, wall and expected seconds, peak RSS, versions); the same code in the runner's process and in a worker."""

from __future__ import annotations

import math
import resource
import time
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from flowlab.core.bench import BenchContext, BenchResult, Curve, DataMissing, Scenario

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
        """The record as a dict of its fields, one line of results.jsonl."""
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
