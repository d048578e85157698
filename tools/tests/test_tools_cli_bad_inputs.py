"""The tools' own groups (`bench`, `cache`, `data`) meet the kit's bad inputs through the `flowlab` command itself,
its error boundary included: one error naming the option or file, exit 2, nothing run and nothing overwritten."""

from __future__ import annotations

import json

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.tools.bench.command import app as bench_app
from flowlab.tools.cache_cli import app as cache_app
from flowlab.tools.cli import app
from flowlab.tools.data_cli import app as data_app


def test_bench_cache_and_data_refuse_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAB_CACHE", str(tmp_path / "cache"))
    files = bad_files(tmp_path / "bad", ".jsonl")
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "results.jsonl").write_text(json.dumps({"name": "x", "seed": 0, "status": "ok"}) + "\n")
    folders = {}
    for name, path in files.items():  # a results folder whose results.jsonl is each bad file
        folders[name] = tmp_path / f"run_{name}"
        folders[name].mkdir()
        if path.exists():
            (folders[name] / "results.jsonl").write_bytes(path.read_bytes())
    folders["foreign"] = tmp_path / "run_foreign"
    folders["foreign"].mkdir()
    (folders["foreign"] / "results.jsonl").write_text('{"a": 1}\n[1, 2]\n')
    quick = ["bench", "--only", "tools.cli.help", "--suite", "smoke"]
    cases = [
        BadInput("choice", ["bench", "--suite", "nope"], ["unknown suite"]),
        BadInput("choice", ["bench", "--only", "nosuchthing"], ["no scenario matches"]),
        BadInput("range", [*quick, "--seeds", "0"], ["--seeds"]),
        BadInput("type", [*quick, "--seeds", "two"], ["--seeds"]),
        BadInput("range", [*quick, "--first-seed", "-1"], ["--first-seed"]),
        BadInput("range", [*quick, "--jobs", "0"], ["--jobs"]),
        BadInput("choice", [*quick, "--device", "tpu"], ["--device"]),
        BadInput("mixing", [*quick, "--out", str(earlier)], ["--out", "results.jsonl"]),
        BadInput("wrong_content", [*quick, "--out", str(files["empty"])], ["--out", "is a file"]),
        BadInput("missing_file", ["bench", "report", str(tmp_path / "nowhere")], ["FOLDER", "nowhere"]),
        BadInput("empty_file", ["bench", "report", str(folders["empty"])], ["FOLDER", "no benchmark records"]),
        BadInput("corrupt_file", ["bench", "report", str(folders["garbage"])], ["FOLDER", "corrupt"]),
        BadInput("pickle", ["bench", "report", str(folders["pickle"])], ["FOLDER", "corrupt"]),
        BadInput("wrong_content", ["bench", "report", str(folders["foreign"])], ["FOLDER", "no benchmark records"]),
        BadInput("choice", ["cache", "clear", "no-such-artifact"], ["no-such-artifact"]),
        BadInput("type", ["cache", "list", "--bogus"], ["--bogus"]),
        BadInput("type", ["data", "list", "--bogus"], ["--bogus"]),
        BadInput("type", ["data", "check", "--bogus"], ["--bogus"]),
    ]
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "bad" / "PICKLE_RAN")
    for group, sub in (("bench", bench_app), ("cache", cache_app), ("data", data_app)):
        mine = [BadInput(c.kind, c.args[1:], c.names) for c in cases if c.args[0] == group]
        assert uncovered_commands(sub, mine) == [], group
    assert (earlier / "results.jsonl").read_text().count("\n") == 1  # the earlier run's results are kept
