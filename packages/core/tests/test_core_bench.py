"""The benchmark protocol's helpers: typed scenario variants and the plotting helper."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.image import imread

from flowlab.core.bench import INFRASTRUCTURE, BenchResult, Scenario, figure, peak_memory
from flowlab.core.config import Config


@dataclass(frozen=True)
class Sizes(Config):
    n: int = 10


def test_figure_writes_a_png_of_the_requested_size_and_panels(tmp_path):
    path = tmp_path / "sub" / "panels.png"
    with figure(path, ncols=3, size=(6.0, 2.0), dpi=50) as (fig, axes):
        assert axes.shape == (3,) and fig.get_size_inches().tolist() == [6.0, 2.0]
        assert matplotlib.rcParams["axes.spines.top"] is False  # the project style, wherever the process runs
        axes[0].imshow(np.eye(4))
        axes[1].plot([0, 1], [1, 0])
    assert imread(path).shape == (100, 300, 4)  # a PNG of size x dpi pixels, RGBA
    with figure(tmp_path / "one.png") as (_, ax):
        ax.bar([0, 1], [1, 2])
    assert (tmp_path / "one.png").stat().st_size > 0


def test_a_failing_plot_writes_no_file(tmp_path):
    with pytest.raises(ZeroDivisionError), figure(tmp_path / "bad.png") as (_, ax):
        ax.plot([0], [1 / 0])
    assert not (tmp_path / "bad.png").exists()


def test_scenario_variants_are_instances_of_one_config_type():
    ok = Scenario("core.x.y", "core", "x", lambda ctx: BenchResult({}), {"quick": Sizes(1), "full": Sizes()}, {})
    assert ok.variants["quick"].n == 1
    with pytest.raises(ValueError, match="one Config subclass"):
        Scenario("core.x.y", "core", "x", lambda ctx: BenchResult({}), {"quick": {"n": 1}, "full": Sizes()}, {})


def test_an_infrastructure_scenario_cannot_be_a_headline_case():
    args = ("core.x.y", "core", "x", lambda ctx: BenchResult({}), {"quick": Sizes(1), "full": Sizes()}, {})
    assert not Scenario(*args, tags=frozenset({INFRASTRUCTURE})).headline
    with pytest.raises(ValueError, match="not a method: it has no headline"):
        Scenario(*args, tags=frozenset({INFRASTRUCTURE}), headline=True)


def test_name_seed_depends_on_the_seed_and_the_name_only():
    from flowlab.core.bench import name_seed

    assert name_seed(3, "td") == name_seed(3, "td") == 3000 + name_seed(0, "td")
    assert name_seed(0, "value_flows") == 18  # crc32(b"value_flows") % 1000: the seeds behind the recorded rl rows
    seeds = {name_seed(s, n) for s in range(3) for n in ("a", "b", "gaussian_bc", "mac_flow")}
    assert len(seeds) == 12 and all(0 <= x < 3000 for x in seeds)


def test_peak_memory_counts_the_live_tensors_of_a_call():
    mib = 2**20

    def two_live():  # 4 MiB and 8 MiB alive together, then both freed
        a = torch.ones(mib, dtype=torch.float32)
        b = torch.ones(2 * mib, dtype=torch.float32)
        return float(a[0] + b[0])

    def one_at_a_time():  # 8 MiB, freed before the next 8 MiB
        for _ in range(3):
            float(torch.ones(2 * mib, dtype=torch.float32)[0])

    assert 12 * mib <= peak_memory(two_live, "cpu") < 13 * mib
    assert 8 * mib <= peak_memory(one_at_a_time, "cpu") < 9 * mib


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie has exited; only its parent's reaping is left


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
def test_spawn_pool_workers_exit_when_their_parent_is_killed():
    """A runner killed by SIGKILL (no cleanup runs) must not leave its spawned workers computing: a worker busy
    in a two-minute task exits within seconds of its parent's death."""
    script = (
        "import os, sys, time\n"
        "from flowlab.core.processes import spawn_pool\n"
        "pool = spawn_pool(1)\n"
        "print(pool.submit(os.getpid).result(), flush=True)\n"
        "pool.submit(time.sleep, 120)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        time.sleep(0.5)  # the worker is in its long task now
        assert _alive(worker)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), f"worker {worker} outlived its killed parent"
