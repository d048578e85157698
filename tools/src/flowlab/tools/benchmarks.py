"""`tools.cli.help`: the wall time of `flowlab --help` and of every group's `flowlab GROUP --help`, each a fresh
process as a user starts it, against the bare interpreter's start-up and a torch import measured in the same run
(target: every help within 1 s on the 2-core machine)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace

from flowlab.core.bench import INFRASTRUCTURE, BenchContext, BenchResult, Claim, Scenario
from flowlab.core.config import Config
from flowlab.tools.plugins import command_entry_points


@dataclass(frozen=True)
class HelpBench(Config):
    """Runs of each command (the median is reported)."""

    repeats: int = 5


FULL = HelpBench(repeats=11)
QUICK = replace(FULL, repeats=5)
SMOKE = replace(QUICK, repeats=1)


def _median_seconds(code: str, args: list[str], repeats: int) -> float:
    """Median wall seconds of `python -c code *args` in a fresh process."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(ctx: BenchContext) -> BenchResult:
    """Median wall time of `flowlab --help` and of each group's --help in fresh processes, beside python's start-up
    and a torch import."""
    cfg: HelpBench = ctx.config
    flowlab = "import sys; from flowlab.tools.cli import main; sys.argv[0] = 'flowlab'; main()"
    top = _median_seconds(flowlab, ["--help"], cfg.repeats)
    groups = {name: _median_seconds(flowlab, [name, "--help"], cfg.repeats) for name in sorted(command_entry_points())}
    slowest = max(groups, key=groups.__getitem__)
    python = _median_seconds("pass", [], cfg.repeats)
    torch_import = _median_seconds("import torch", [], cfg.repeats)
    metrics = {"top_help_s": top, "slowest_group_help_s": groups[slowest],
               **{f"help_{name}_s": s for name, s in groups.items()}}  # fmt: skip
    return BenchResult(
        metrics=metrics,
        baselines={"python start-up": {"top_help_s": python}, "python + import torch": {"top_help_s": torch_import}},
        references={"target [issue 41]": {"top_help_s": 1.0, "slowest_group_help_s": 1.0}},
    )


SCENARIO = Scenario(
    name="tools.cli.help",
    package="tools",
    method="flowlab CLI",
    tags=frozenset({INFRASTRUCTURE}),  # the CLI, not a method: in quick, not in the default suite
    run=run,
    variants={"smoke": SMOKE, "quick": QUICK, "full": FULL},
    directions={"top_help_s": "min", "slowest_group_help_s": "min"},
    description="Wall time of `flowlab --help` and of each group's --help (fresh processes) against python's "
    "start-up and a torch import.",
    expected_seconds={"smoke": 5, "quick": 25, "full": 50},
    claim=Claim("every --help within 1 s", "slowest_group_help_s", "<=", 1.0),
)
SCENARIOS = (SCENARIO,)
