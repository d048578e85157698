"""The `flowlab` command end to end, through its console script in a subprocess (as a user runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowlab.tools.cli import app


def flowlab(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "from flowlab.tools.cli import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=cwd, timeout=300)


def test_help_lists_groups():
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    assert "bench" in res.output and "data" in res.output


def test_version_lists_every_member():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    for member in (
        "core",
        "vision-gen",
        "molecular",
        "rl-control",
        "biology-dynamics",
        "crowd-sim",
        "trust-ood",
        "datasets",
        "tools",
    ):
        assert f"flowlab-{member} " in res.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "--only", "nosuchthing"], "no scenario matches"),
        (["bench", "--suite", "nope"], "unknown suite"),
        (["bench", "--seeds", "0"], "--seeds"),
        (["bench", "--first-seed", "-1"], "--first-seed"),
    ],
)
def test_bad_invocations_exit_nonzero_with_one_line(args, needle):
    res = flowlab(*args)
    assert res.returncode == 2
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip() and ln.startswith("error:")]
    assert lines and needle in lines[-1]
    assert "Traceback" not in res.stdout + res.stderr


def test_data_check_names_missing_variable():
    env = {k: v for k, v in os.environ.items() if k != "FLOWLAB_DATA"}
    res = subprocess.run(
        [sys.executable, "-c", "from flowlab.tools.cli import main; main()", "data", "check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode != 0 and "FLOWLAB_DATA" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_data_check_reports_missing_dataset(tmp_path):
    res = flowlab("data", "check", env={"FLOWLAB_DATA": str(tmp_path)})
    assert res.returncode == 1 and "missing earth_sphere" in res.stdout


def test_bench_writes_results_report_and_plot(tmp_path):
    out = tmp_path / "out"
    res = flowlab("bench", "--only", "core.solvers", "--out", str(out), "--device", "cpu", "--first-seed", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == "ok" for r in records)
    assert {r["seed"] for r in records} == {2}  # --first-seed K with one seed runs seed K alone
    for key in (
        "name",
        "package",
        "method",
        "metrics",
        "baselines",
        "ratios",
        "wall_seconds",
        "peak_rss_mb",
        "device",
        "seed",
        "config",
        "versions",
        "git_commit",
    ):
        assert key in records[0]
    assert (out / "report.md").is_file() and list((out / "plots").glob("*.png"))
