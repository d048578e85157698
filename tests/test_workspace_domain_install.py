"""One domain installed alone: a fresh environment with only the core, datasets, tools and flowlab-trust-ood (the
lock's versions, offline, out of uv's cache: `uv sync --package` into another environment) lists only its groups
and runs the domain's smallest training command, so a dependency a domain imports but does not declare fails here
and not on a user's machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = ("flowlab-tools", "flowlab-trust-ood")


def _run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # bytecode is written into the throwaway environment, so that only its first command compiles what it imports
    kept = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {**kept, "OMP_NUM_THREADS": "1", "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", **(env or {})}
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, f"{' '.join(map(str, args))}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed (.ci/run installs it)")
def test_trust_ood_alone_lists_its_group_and_trains(tmp_path):
    venv = tmp_path / "venv"
    packages = [arg for name in MEMBERS for arg in ("--package", name)]
    # .ci/run exports UV_COMPILE_BYTECODE=1, which would byte-compile all of torch here (about 60 s against 1 s);
    # the modules the commands below import are compiled as they first load
    _run("uv", "sync", "--locked", "--offline", "--no-default-groups", "-q", "--python", sys.executable, *packages,
         env={"UV_PROJECT_ENVIRONMENT": str(venv), "UV_COMPILE_BYTECODE": "0"})  # fmt: skip

    listing = _run(venv / "bin/flowlab", "--help").stdout
    assert "trust" in listing and "manifold" in listing
    assert not {"cells", "rl", "vision", "molecular", "crowd"} & set(listing.split()), listing
    _run(venv / "bin/python", "-c", "import importlib.util as u; assert u.find_spec('flowlab.vision_gen') is None")

    run = tmp_path / "run"
    _run(venv / "bin/flowlab", "trust", "train", "--out", run, "--pairs", "64", "--regressor-steps", "3",
         "--score-steps", "3", "--regressor", "cnn", "--ode-steps", "2", "--calib", "8")  # fmt: skip
    certified = _run(venv / "bin/flowlab", "trust", "certify", "--run", run, "--count", "2").stdout
    assert certified.count("param_shift[") == 2, certified
