"""The `flowlab` command end to end, through its console script in a subprocess (as a user runs it)."""

from __future__ import annotations

import json
import os
import re
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
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html  # plots inlined
    assert "<table>" in html and "core.solvers" in html


def test_list_fits_80_columns_and_marks_the_suites():
    res = flowlab("bench", "--list", env={"COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if line.startswith(("core.", "vision.", "mol.", "rl.", "bio.", "crowd.", "trust."))]
    assert len(rows) >= 20 and all(line.split()[2][1:] == "sqf" for line in rows)  # every scenario: smoke, quick, full
    assert "Gaussianity" not in res.stdout
    assert "Gaussianity" in flowlab("bench", "--list", "--verbose", "--only", "vision.watermark.stats").stdout


def test_dry_run_prints_the_default_plan_and_runs_nothing(tmp_path):
    res = flowlab("bench", "--dry-run", env={"FLOWLAB_CACHE": str(tmp_path / "cache"), "COLUMNS": "200"}, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "plan: suite default" in res.stdout and "vision.watermark.e2e" in res.stdout
    assert "vision.digits_denoiser" in res.stdout and "build" in res.stdout  # a cold cache: the teacher is built
    assert re.search(r"of it building artifacts: \d+ alone, then \d+ on \d+ worker", res.stdout)  # two-thread ones
    assert "crowd.envsocial.gc" not in res.stdout  # not a headline case
    assert "vision.kit.teachers" not in res.stdout  # infrastructure, not a method
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()


def test_cache_list_and_clear(tmp_path):
    env = {"FLOWLAB_CACHE": str(tmp_path)}
    entry = tmp_path / "artifacts" / "core.toy" / "0123456789abcdef"
    entry.mkdir(parents=True)
    (entry / "manifest.json").write_text(json.dumps({"name": "core.toy", "key": entry.name, "build_seconds": 3}))
    listed = flowlab("cache", "list", env=env)
    assert listed.returncode == 0 and "core.toy" in listed.stdout and "1 artifact(s)" in listed.stdout
    unknown = flowlab("cache", "clear", "vision.nothing", env=env)
    assert unknown.returncode == 2 and "no cached artifact named 'vision.nothing'" in unknown.stdout
    cleared = flowlab("cache", "clear", env=env)
    assert cleared.returncode == 0 and "removed 1" in cleared.stdout and not entry.exists()
