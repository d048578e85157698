"""The benchmark runner: records, skips, errors, ratios, and the written report."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from flowlab.core.artifacts import Artifact
from flowlab.core.bench import BenchResult, Claim, Scenario, require_file
from flowlab.core.config import Config
from flowlab.tools.bench.case import ratios
from flowlab.tools.bench.command import _makespan, print_plan
from flowlab.tools.bench.discovery import SelectionError, discover, select
from flowlab.tools.bench.jobs import available_cores, run_cases
from flowlab.tools.bench.report import write_report
from flowlab.tools.bench.runner import build_artifacts, run_all, side_by_side


@dataclass(frozen=True)
class Tiny(Config):
    n: int = 2


@dataclass(frozen=True)
class Other(Config):
    n: int = 2


def _ok(ctx):
    # a real (tiny) computation: sample mean of N(0, 1) against the exact 0, seeded by ctx.generator
    x = torch.randn(4000, generator=ctx.generator)
    return BenchResult(
        metrics={"abs_mean": float(x.mean().abs()), "std": float(x.std())},
        baselines={"zero": {"abs_mean": 1.0, "std": 0.0}},
        references={"theory [paper]": {"std": 1.0}},
    )


def _missing(ctx):
    require_file(ctx.data_root, "earth_sphere", "nope.csv")


def _boom(ctx):
    raise RuntimeError("exploded on purpose")


def _scenario(name, run):
    return Scenario(
        name=name,
        package="core",
        method=name.split(".")[1],
        run=run,
        variants={"quick": Tiny(n=1), "full": Tiny()},
        directions={"abs_mean": "min", "std": "max"},
    )


SCENARIOS = [
    _scenario("core.ok.case", _ok),
    _scenario("core.missing.case", _missing),
    _scenario("core.boom.case", _boom),
]


def test_runner_records_ok_skipped_and_error(tmp_path):
    records = run_all(
        SCENARIOS,
        seeds=[0, 1],
        variant="quick",
        device=torch.device("cpu"),
        out_dir=tmp_path,
        data_root=tmp_path,
    )
    status = {(r.name, r.seed): r.status for r in records}
    assert status[("core.ok.case", 0)] == "ok" and status[("core.ok.case", 1)] == "ok"
    assert status[("core.missing.case", 0)] == "skipped"
    assert status[("core.boom.case", 1)] == "error"
    ok0, ok1 = (r for r in records if r.name == "core.ok.case")
    assert ok0.metrics != ok1.metrics  # seeds differ
    assert abs(ok0.metrics["std"] - 1) < 0.05
    assert ok0.ratios["zero"]["abs_mean"] == pytest.approx(ok0.metrics["abs_mean"])
    assert ok0.config == {"n": 1} and ok0.peak_rss_mb > 0 and ok0.wall_seconds > 0
    skipped = next(r for r in records if r.status == "skipped")
    assert "nope.csv" in skipped.message and "earth_sphere" in skipped.message
    boom = next(r for r in records if r.status == "error")
    assert "exploded on purpose" in boom.message
    json.dumps([r.to_json() for r in records])  # serialisable


def test_same_seed_reproduces(tmp_path):
    a = run_all(
        SCENARIOS[:1],
        seeds=[3],
        variant="quick",
        device=torch.device("cpu"),
        out_dir=tmp_path,
        data_root=None,
    )
    b = run_all(
        SCENARIOS[:1],
        seeds=[3],
        variant="quick",
        device=torch.device("cpu"),
        out_dir=tmp_path,
        data_root=None,
    )
    assert a[0].metrics == b[0].metrics


def test_report_has_tables_and_plots(tmp_path):
    records = run_all(
        SCENARIOS, seeds=[0, 1], variant="quick", device=torch.device("cpu"), out_dir=tmp_path, data_root=None
    )
    report = write_report([r.to_json() for r in records], tmp_path)
    text = report.read_text()
    assert "## flowlab.core" in text and "### `core.ok.case`" in text
    assert "| zero (baseline) |" in text and "theory [paper] (published)" in text
    assert "abs_mean ↓" in text and "**error**" in text and "**skipped**" in text
    png = tmp_path / "plots" / "core.ok.case.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _inf_on_seed_one(ctx):
    return BenchResult(metrics={"abs_mean": math.inf if ctx.seed == 1 else 0.5, "std": 1.0})


def test_report_shows_an_infinite_metric_without_a_spread(tmp_path):
    """A metric that is inf on one seed (e.g. an NLL where the model's density is zero) reads 'inf', no ± spread."""
    scenario = _scenario("core.inf.case", _inf_on_seed_one)
    records = run_all([scenario], seeds=[0, 1], variant="quick", device=torch.device("cpu"), out_dir=tmp_path,
                      data_root=None)  # fmt: skip
    text = write_report([r.to_json() for r in records], tmp_path).read_text()
    assert "| inf | 1 ± 0 |" in text


def test_ratios_divide_shared_metrics_only():
    out = ratios({"a": 2.0, "b": 1.0}, {"x": {"a": 4.0, "c": 1.0}, "y": {"c": 2.0}})
    assert out == {"x": {"a": 0.5}}


def test_selection_patterns():
    names = lambda sel: [s.name for s in sel]  # noqa: E731
    assert names(select(SCENARIOS, ["core.ok"], "quick")) == ["core.ok.case"]
    assert names(select(SCENARIOS, ["core.*.case"], "full")) == [s.name for s in SCENARIOS]
    assert names(select(SCENARIOS, ["boom,missing"], "quick")) == ["core.missing.case", "core.boom.case"]
    with pytest.raises(SelectionError, match="no scenario matches"):
        select(SCENARIOS, ["nosuchthing"], "quick")
    with pytest.raises(SelectionError, match="unknown suite"):
        select(SCENARIOS, None, "nope")


def test_scenario_validates_its_declaration():
    typed = {"quick": Tiny(n=1), "full": Tiny()}
    with pytest.raises(ValueError, match="name"):
        Scenario(name="bad", package="core", method="m", run=_ok, variants=typed, directions={})
    with pytest.raises(ValueError, match="variants"):
        Scenario(name="core.m.c", package="core", method="m", run=_ok, variants={"quick": Tiny()}, directions={})
    for untyped in ({"quick": {"n": 1}, "full": {"n": 2}}, {"quick": Tiny(), "full": Other()}):
        with pytest.raises(ValueError, match="one Config subclass"):
            Scenario(name="core.m.c", package="core", method="m", run=_ok, variants=untyped, directions={})


def _build_count(cfg: Tiny, folder) -> None:
    (folder / "n.txt").write_text(str(cfg.n))
    with open(folder.parent.parent / "builds.log", "a") as f:
        f.write("built\n")


def test_artifacts_are_built_once_per_run_on_their_own_row_and_reused_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path / "cache"))
    art = Artifact("core.tiny_table", build=_build_count, config=Tiny(n=3), expected_seconds=1.0)
    needs = [
        Scenario(name=f"core.needs.{k}", package="core", method="needs", run=_ok,
                 variants={"quick": Tiny(), "full": Tiny()}, directions={}, requires=lambda cfg, device: (art,))
        for k in ("a", "b")
    ]  # fmt: skip
    first = run_all(needs, seeds=[0], variant="quick", device=torch.device("cpu"), out_dir=tmp_path, data_root=None)
    rows = [r for r in first if r.kind == "artifact"]
    assert [(r.name, r.status, r.message) for r in rows] == [("core.tiny_table", "ok", "built")]
    second = run_all(needs, seeds=[0], variant="quick", device=torch.device("cpu"), out_dir=tmp_path, data_root=None)
    assert [r.message for r in second if r.kind == "artifact"] == ["cached"]
    assert (tmp_path / "cache/artifacts/builds.log").read_text() == "built\n"
    text = write_report([r.to_json() for r in second], tmp_path, elapsed=12.4).read_text()
    assert "## Artifacts: 0 built, 1 reused from the cache" in text
    assert "- wall time: 12 s elapsed; " in text


_WHERE = """
import json, os, time
from dataclasses import dataclass
import torch
from flowlab.core.config import Config

@dataclass(frozen=True)
class Where(Config):
    n: int = 1

def build(cfg, folder):
    time.sleep(1.0)  # long enough that both builds overlap when they run side by side
    (folder / "where.json").write_text(json.dumps({"pid": os.getpid(), "threads": torch.get_num_threads()}))
"""


@pytest.mark.skipif(available_cores() < 2, reason="side-by-side builds need two cores")
def test_missing_artifacts_build_side_by_side_one_thread_each_and_are_reused(tmp_path, monkeypatch):
    (tmp_path / "where_builder.py").write_text(_WHERE)  # a module the spawned workers can import too
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path / "cache"))
    where = importlib.import_module("where_builder")
    arts = [Artifact(f"core.tiny_{k}", build=where.build, config=where.Where(n=n), expected_seconds=n)
            for k, n in (("short", 1), ("long", 2))]  # fmt: skip
    started = []
    rows = list(build_artifacts(arts, on_start=lambda name, seed: started.append((name, seed))))
    assert started == [("core.tiny_long", -1), ("core.tiny_short", -1)]  # the longest first
    assert sorted((r.name, r.status, r.message) for r in rows) == [
        ("core.tiny_long", "ok", "built"), ("core.tiny_short", "ok", "built")]  # fmt: skip
    seen = [json.loads((Path(r.config["path"]) / "where.json").read_text()) for r in rows]
    assert {w["threads"] for w in seen} == {1}
    assert len({w["pid"] for w in seen} | {os.getpid()}) == 3  # two worker processes, not this one
    assert [r.message for r in build_artifacts(arts)] == ["cached", "cached"]


@pytest.mark.skipif(available_cores() < 2, reason="side-by-side builds need two cores")
def test_an_artifact_of_two_threads_builds_alone_in_this_process_before_the_one_thread_builds(tmp_path, monkeypatch):
    (tmp_path / "where_builder.py").write_text(_WHERE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path / "cache"))
    where = importlib.import_module("where_builder")
    wide = Artifact("core.tiny_wide", build=where.build, config=where.Where(n=0), expected_seconds=0.5, threads=2)
    arts = [Artifact(f"core.tiny_{n}", build=where.build, config=where.Where(n=n), expected_seconds=n)
            for n in (1, 2)] + [wide]  # fmt: skip
    started = []
    rows = {r.name: r for r in build_artifacts(arts, on_start=lambda name, seed: started.append(name))}
    assert started == ["core.tiny_wide", "core.tiny_2", "core.tiny_1"]  # alone first, though the shortest
    seen = {n: json.loads((Path(r.config["path"]) / "where.json").read_text()) for n, r in rows.items()}
    assert seen["core.tiny_wide"] == {"pid": os.getpid(), "threads": 2}
    assert {seen[n]["threads"] for n in ("core.tiny_1", "core.tiny_2")} == {1}
    assert os.getpid() not in {seen[n]["pid"] for n in ("core.tiny_1", "core.tiny_2")}


def test_the_plan_estimates_builds_started_longest_first_on_the_first_free_worker():
    assert _makespan([1.0, 2.0, 2.0, 3.0], 2) == 4.0
    assert _makespan([5.0, 1.0], 1) == 6.0 and _makespan([5.0, 1.0], 4) == 5.0


@pytest.mark.parametrize(
    ("cores", "jobs", "minutes"), [(2, 3, 45.0), (2, 2, 60.0), (4, 3, 30.0), (2, 1, 90.0), (2, 4, 45.0)]
)
def test_the_plan_shares_the_cores_among_more_jobs_than_cores(monkeypatch, cores, jobs, minutes):
    monkeypatch.setattr("flowlab.tools.bench.jobs.available_cores", lambda: cores)
    variants = {"quick": Tiny(), "full": Tiny()}
    one = Scenario(name="core.long.case", package="core", method="long", run=_ok, variants=variants, directions={},
                   expected_seconds={"quick": 1800.0})  # fmt: skip
    total, _ = print_plan([one], suite="quick", seeds=[0, 1, 2], jobs=jobs, device=torch.device("cpu"))
    assert total == pytest.approx(minutes * 60)  # 3 seeds of 30 min: 3 jobs on 2 cores take 45 min; 2 jobs 60


def _claimed(ctx):
    return BenchResult(metrics={"err": 0.1 * (ctx.seed + 1)}, baselines={"base": {"err": 1.0}, "worse": {"err": 2.0}},
                       references={"Paper [paper]": {"err": 0.05}})  # fmt: skip


def test_report_opens_with_one_headline_row_per_method_and_the_claims_verdict(tmp_path):
    claim = Claim("error at most 1/4 of the baseline's", "err", "<=", 0.25, baseline="base")
    scenario = Scenario(name="core.claimed.case", package="core", method="claimed", run=_claimed,
                        variants={"quick": Tiny(), "full": Tiny()}, directions={"err": "min"}, headline=True,
                        claim=claim)  # fmt: skip
    records = run_all([scenario], seeds=[0, 1, 2], variant="quick", device=torch.device("cpu"), out_dir=tmp_path,
                      data_root=None)  # fmt: skip
    assert [r.claim["held"] for r in records] == [True, True, False]  # 0.1, 0.2, 0.3 against 0.25
    text = write_report([r.to_json() for r in records], tmp_path).read_text()
    head = text.split("## Headline: one row per method")[1].split("##")[0]
    assert "| claimed | `core.claimed.case` | err | 0.2 ± 0.1 | 1 ± 0 (base) | 0.05 (Paper [paper]) |" in head
    assert "| 2/3 seeds |" in head
    html = (tmp_path / "report.html").read_text()
    assert "<table>" in html and "data:image/png;base64," in html and 'src="plots/' not in html


def test_jobs_two_give_the_seeded_metrics_of_one_process(tmp_path):
    """Two cheap registered scenarios, two seeds, in two spawned workers against this process."""
    chosen = [s for s in discover().scenarios if s.name in ("core.solvers", "core.likelihood")]
    kwargs = {"seeds": [0, 1], "variant": "smoke", "device": torch.device("cpu"), "data_root": None}
    serial = run_all(chosen, jobs=1, out_dir=tmp_path / "a", **kwargs)
    parallel = run_all(chosen, jobs=2, out_dir=tmp_path / "b", **kwargs)

    def seeded(records):
        timing = ("seconds", "_ms", "speedup")  # wall-clock readings differ between processes by nature
        return {(r.name, r.seed): {k: v for k, v in r.metrics.items() if not any(w in k for w in timing)}
                for r in records}  # fmt: skip

    assert len(parallel) == 4 and all(r.status == "ok" for r in parallel)
    assert seeded(serial) == seeded(parallel)


def test_one_thread_scenarios_run_side_by_side_with_the_metrics_of_one_process(tmp_path, monkeypatch):
    """core.gfm.torus pins one thread: with --jobs 1 its two seeds run in two one-thread workers, and every seeded
    metric equals the one-process run's (the same scenario not declared single-threaded)."""
    import flowlab.tools.bench.runner as runner

    torus = next(s for s in discover().scenarios if s.name == "core.gfm.torus")
    assert torus.single_thread
    kwargs = {"seeds": [0, 1], "variant": "smoke", "device": torch.device("cpu"), "data_root": None}
    serial = run_all([dataclasses.replace(torus, single_thread=False)], out_dir=tmp_path / "a", **kwargs)
    calls = []

    def spy(cases, **kw):
        calls.append(([c.name for c in cases], kw["jobs"], kw["threads"]))
        yield from run_cases(cases, **kw)

    monkeypatch.setattr(runner, "run_cases", spy)
    paired = run_all([torus], out_dir=tmp_path / "b", **kwargs)
    expect = [] if available_cores() < 2 else [(["core.gfm.torus"] * 2, 2, 1)]
    assert calls == expect

    def seeded(records):
        timing = ("_s", "ms_per_step", "step_cost")  # wall-clock readings differ between processes by nature
        return {r.seed: {k: v for k, v in r.metrics.items() if not any(w in k for w in timing)} for r in records}

    assert all(r.status == "ok" for r in paired) and seeded(serial) == seeded(paired) and len(seeded(paired)[0]) > 5


def test_side_by_side_only_for_a_serial_cpu_run_of_two_one_thread_cases_or_more():
    one = Scenario("core.one.case", "core", "one", run=lambda ctx: None, variants={"quick": Tiny(), "full": Tiny()},
                   directions={}, single_thread=True)  # fmt: skip
    other = dataclasses.replace(one, name="core.other.case", single_thread=False)
    cpu = torch.device("cpu")
    two = 2 if available_cores() >= 2 else 0
    assert side_by_side([one, other], [0, 1], cpu, 1) == two
    assert side_by_side([one, dataclasses.replace(one, name="core.one.again")], [0], cpu, 1) == two
    assert side_by_side([one, other], [0], cpu, 1) == 0  # one case: nothing to pair
    assert side_by_side([one], [0, 1], cpu, 2) == 0  # --jobs 2 runs every case in workers anyway
    assert side_by_side([one], [0, 1], torch.device("cuda"), 1) == 0
