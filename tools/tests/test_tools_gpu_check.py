"""tools/gpu-check's offline parts: scenarios found from the members' sources without entry points, the wheel
bundle round trip, missing packages named, and one run of the wrapper on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

from flowlab.tools.bench.discovery import discover
from flowlab.tools.gpu_check import ROOT, _missing, build_bundle, scenarios_from_sources, use_wheels


def test_sources_give_the_same_scenarios_as_the_entry_points():
    found, failures = scenarios_from_sources()
    assert failures == {}
    assert sorted(s.name for s in found) == [s.name for s in discover().scenarios]


def test_a_bundled_wheel_unpacks_and_imports(tmp_path, monkeypatch):
    (wheel,) = build_bundle(tmp_path / "bundle", names=("mdurl",), limit_mb=1.0)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "mdurl/__init__.py" in names and any(n.endswith(".dist-info/METADATA") for n in names)
    assert not any("__pycache__" in n for n in names)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert use_wheels(tmp_path / "bundle") == ["mdurl"]
    assert zipfile.is_zipfile(wheel) and any("gpu-check-wheels-" in p for p in sys.path)
    assert build_bundle(tmp_path / "small", names=("mdurl",), limit_mb=0.0) == []  # over the limit: left out


def test_a_missing_module_is_named():
    assert _missing("ModuleNotFoundError: No module named 'ot.lp'") == "ot.lp"
    assert _missing("ValueError: bad") is None


def test_wrapper_runs_the_two_core_timings_from_sources_on_cpu(tmp_path):
    """The wrapper's own PYTHONPATH, this interpreter (a GPU machine uses its python3): the smoke size, core only."""
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run(
        [str(ROOT / "tools/gpu-check"), "--device", "cpu", "--suite", "smoke", "--budget", "0", "--out",
         str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    records = [json.loads(line) for line in (tmp_path / "out/results.jsonl").read_text().splitlines()]
    ran = {r["name"] for r in records if r["status"] == "ok"}
    assert len(ran) == 1  # --budget 0: the cheapest scenario starts, none after it
    assert all(r["status"] == "skipped" and "budget" in r["message"] for r in records if r["name"] not in ran)
    assert (tmp_path / "out/report.md").is_file()


def test_only_narrows_the_check_and_a_bad_pattern_is_one_line(tmp_path, capsys):
    from flowlab.tools.gpu_check import main

    out = tmp_path / "out"
    assert main(["--device", "cpu", "--suite", "smoke", "--only", "core.solvers", "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["name"], r["status"]) for r in records] == [("core.solvers", "ok")]
    with pytest.raises(SystemExit):
        main(["--device", "cpu", "--suite", "smoke", "--only", "no.such.case", "--out", str(out)])
    assert "--only: no scenario matches 'no.such.case'" in capsys.readouterr().err
