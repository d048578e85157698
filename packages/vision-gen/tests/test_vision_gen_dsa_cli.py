"""`flowlab vision dsa check|bench` end to end on local gloo processes at toy size, and every kind of bad input
(`flowlab.core.testing`) ending in one error naming the option (exit 2) before any work."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, check_bad_inputs, uncovered_commands
from flowlab.vision_gen.cli import vision
from flowlab.vision_gen.dsa.cli import app

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = ["--frames", "4", "--grid", "2", "--heads", "4", "--head-dim", "4", "--sinks", "2"]
KINDS = {"check": ["range", "type", "choice", "shape"], "bench": ["range", "type", "nan", "shape"]}


def _rows(*args: str) -> list[dict]:
    res = CliRunner().invoke(vision, ["dsa", *args])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("extra", [[], ["--all-to-all", "p2p", "--schedule", "naive"]])
def test_check_on_two_gloo_ranks(extra):
    (row,) = _rows("check", "--world-size", "2", *TINY, *extra)
    assert row["exact"] and row["counts_match_closed_form"] and row["agree"]
    assert max(row["errors"].values()) <= 1e-10 and {"dsa/mixed", "ring", "ulysses"} <= set(row["counts"])


def test_bench_rows():
    rows = _rows("bench", "--world-size", "4", *TINY)
    counted = {r["method"]: r for r in rows if "bytes" in r}
    assert counted["dsa/mixed"]["bytes"] == counted["dsa/mixed"]["closed_bytes"]
    assert counted["dsa/mixed"]["bytes"] < counted["usp"]["bytes"] < counted["ring"]["bytes"]
    modelled = {r["method"] for r in rows if "modelled_ms" in r}
    assert {"dsa", "dsa_naive", "ring", "ulysses", "usp", "dense"} <= modelled


def _cases() -> list[BadInput]:
    def check() -> list[str]:
        return ["check", "--world-size", "4", *TINY]

    def bench() -> list[str]:
        return ["bench", "--world-size", "2", *TINY]

    cases = []
    for kind, base, bad in (
        ("range", check, [("--world-size", "3"), ("--heads", "0"), ("--window", "3"), ("--sinks", "9"),
                          ("--seed", str(2**64)), ("--temporal-radius", "-1")]),
        ("shape", check, [("--frames", "6")]),
        ("type", check, [("--heads", "many"), ("--seed", "x")]),
        ("choice", check, [("--backend", "mpi"), ("--schedule", "eager"), ("--all-to-all", "ring")]),
        ("range", bench, [("--world-size", "0"), ("--latency", "0"), ("--window", "-1")]),
        ("shape", bench, [("--frames", "3")]),
        ("type", bench, [("--grid", "x")]),
        ("nan", bench, [("--bandwidth", "nan"), ("--latency", "inf")]),
    ):  # fmt: skip
        cases += [BadInput(kind, [*base(), *args], [args[0]]) for args in bad]
    if torch.cuda.device_count() < 4:
        cases.append(BadInput("choice", [*check(), "--backend", "nccl"], ["--backend", "GPUs"]))
    return cases


def test_bad_inputs():
    cases = _cases()
    check_bad_inputs(app, cases)
    assert uncovered_commands(app, cases, KINDS) == []
