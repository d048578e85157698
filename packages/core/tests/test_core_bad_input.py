"""The bad-input kit: it passes clean refusals, and reports each way an entry point can fail a user."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import typer

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands

app = typer.Typer()


@app.command()
def load(path: Path, steps: int = typer.Option(1, min=1)) -> None:
    """Well behaved: a missing file is a typer error, a pickle is refused, anything else is a ValueError."""
    if not path.exists():
        raise typer.BadParameter(f"{path} not found", param_hint="PATH")
    data = path.read_bytes()
    if data.startswith(b"\x80"):
        raise ValueError(f"PATH: {path} is a pickle, not a FlowLab file")
    raise ValueError(f"PATH: {path} is empty or corrupt")


@app.command()
def unsafe(path: Path) -> None:
    """Badly behaved: runs the pickle, crashes on garbage, accepts an empty file."""
    data = path.read_bytes()
    if data:
        pickle.loads(data)  # the defect the kit must catch
        raise RuntimeError("weights_only=False would load it")


def test_clean_refusals_pass(tmp_path):
    files = bad_files(tmp_path, ".pt", like=__file__)
    cases = [BadInput("missing_file", ["load", str(files["missing"])], ["PATH", "missing.pt"])]
    cases += [BadInput(kind, ["load", str(files[name])], ["PATH", f"{name}.pt"])
              for kind, name in (("empty_file", "empty"), ("corrupt_file", "garbage"), ("corrupt_file", "truncated"),
                                 ("pickle", "pickle"))]  # fmt: skip
    cases += [BadInput("range", ["load", str(files["empty"]), "--steps", "0"], ["--steps"]),
              BadInput("type", ["load", str(files["empty"]), "--steps", "two"], ["--steps"])]  # fmt: skip
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "PICKLE_RAN")
    assert uncovered_commands(app, cases) == ["unsafe"]
    assert uncovered_commands(app, cases, {"load": ["nan"]}) == ["unsafe", "load (nan)"]


def test_each_failure_is_reported(tmp_path):
    files = bad_files(tmp_path, ".pt")
    cases = [BadInput("empty_file", ["unsafe", str(files["empty"])], ["PATH"]),
             BadInput("pickle", ["unsafe", str(files["pickle"])], ["PATH"]),
             BadInput("corrupt_file", ["load", str(files["garbage"])], ["--out"])]  # fmt: skip
    with pytest.raises(AssertionError) as info:
        check_bad_inputs(app, cases, pickle_marker=tmp_path / "PICKLE_RAN")
    report = str(info.value)
    assert "4 problems in 3 bad inputs" in report
    assert "accepted silently" in report and "traceback: RuntimeError" in report
    assert "advises weights_only=False" not in report  # a traceback's message is reported, not printed
    assert "does not name ['--out']" in report and "a pickle's code ran" in report
    assert (tmp_path / "PICKLE_RAN").exists()


def test_cases_must_say_what_they_are():
    with pytest.raises(ValueError, match="kind"):
        BadInput("typo", ["x"], ["X"])
    with pytest.raises(ValueError, match="names"):
        BadInput("range", ["x"], [])
    with pytest.raises(ValueError, match="cases"):
        check_bad_inputs(app, [])


def test_json_text_is_valid_json_with_reasons_for_non_finite_values():
    import json

    from flowlab.core.cli import json_text

    value = {"fd": float("nan"), "rows": [1.0, float("inf")], "nested": {"w1": -float("inf"), "n": 3}, "ok": 0.5}
    text = json_text(value, indent=1)
    back = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert back == {"fd": None, "fd_reason": "not finite (nan)", "rows": [1.0, None], "ok": 0.5,
                    "nested": {"w1": None, "w1_reason": "not finite (-inf)", "n": 3}}  # fmt: skip
