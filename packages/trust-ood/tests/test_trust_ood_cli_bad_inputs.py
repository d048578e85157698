"""`flowlab trust`: every command refuses bad input (options, trained-study folders, output folders) with one error
line naming the option or file, exit status 2, before any work (`flowlab.core.testing`'s bad-input kit)."""

from __future__ import annotations

import io
import itertools
import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.trust_ood.cli import app

TINY = ["--pairs", "8", "--regressor-steps", "1", "--score-steps", "1", "--regressor", "cnn", "--ode-steps", "1"]
#: the bad weights of `bad_files` by the kind of bad input they are
WEIGHTS = {"empty": "empty_file", "garbage": "corrupt_file", "truncated": "corrupt_file", "pickle": "pickle"}


def _edited(run: Path, dest: Path, file: str, content: bytes | None) -> Path:
    """A copy of the study folder `run` at `dest` whose `file` holds `content` (None: removed)."""
    shutil.copytree(run, dest)
    if content is None:
        (dest / file).unlink()
    else:
        (dest / file).write_bytes(content)
    return dest


def _tensors(**tensors: torch.Tensor) -> bytes:
    """What `torch.save` writes for these tensors."""
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """The smallest trained study (CNN, one step each), the bad weight files made from it, a folder that is not a
    run, and where no refused command may write."""
    root = tmp_path_factory.mktemp("trust_bad_inputs")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    res = CliRunner().invoke(app, ["train", "--out", str(root / "run"), *TINY])
    torch.set_num_threads(threads)
    assert res.exit_code == 0, res.output
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a run")
    paths = {"root": root, "run": root / "run", "notes": root / "notes", "fresh": root / "fresh"}
    return paths | bad_files(root / "bad", ".pt", like=root / "run" / "joint.pt")


@pytest.fixture(scope="module")
def studies(made) -> list[tuple[str, Path, list[str]]]:
    """Copies of the study with one file bad: (kind, folder, what the error must name besides --run)."""
    run, root = made["run"], made["root"] / "studies"
    meta = json.loads((run / "config.json").read_text())
    edits = [("missing_file", "config.json", None), ("empty_file", "config.json", b""),
             ("corrupt_file", "config.json", made["garbage"].read_bytes()),
             ("wrong_content", "config.json", b'{"agent": {}, "env": "pendulum"}'),
             ("nan", "config.json", json.dumps(meta | {"param_scale": float("nan")}).encode()),
             ("missing_file", "joint.pt", None), ("shape", "joint.pt", (run / "input.pt").read_bytes()),
             ("wrong_content", "joint.pt", _tensors(x=torch.zeros(2)))]  # fmt: skip
    edits += [(kind, "regressor_0.pt", made[name].read_bytes()) for name, kind in WEIGHTS.items()]
    found = [
        (kind, _edited(run, root / f"{i}", file, content), [file]) for i, (kind, file, content) in enumerate(edits)
    ]
    return [("missing_file", made["root"] / "nothing", ["config.json"]), *found]


def _options(args, options: list[tuple[str, str, str]]) -> list[BadInput]:
    """`args()` plus one bad option each: (kind, option, value), the error naming the option."""
    return [BadInput(kind, [*args(), option, value], [option]) for kind, option, value in options]


def train_cases(made) -> list[BadInput]:
    outs = itertools.count()

    def args(out: Path | None = None) -> list[str]:
        return ["train", "--out", str(out or made["fresh"] / f"{next(outs)}"), *TINY]

    return [
        BadInput("mixing", [*args(made["run"]), "--pde", "burgers"], ["--out", "another run"]),
        BadInput("mixing", args(made["run"]), ["--out", "--resume"]),
        BadInput("mixing", args(made["notes"]), ["--out", "notes"]),
        *_options(args, [("choice", "--pde", "wave"), ("choice", "--regressor", "mlp"), ("choice", "--device", "tpu"),
                           ("range", "--n", "30"), ("range", "--n", "33"), ("range", "--pairs", "0"),
                           ("range", "--regressor-steps", "0"), ("range", "--score-steps", "0"),
                           ("range", "--ode-steps", "0"), ("range", "--seed", "-1"), ("type", "--n", "big"),
                           ("type", "--pairs", "many"), ("type", "--score-steps", "1.5")]),
    ]  # fmt: skip


def certify_cases(made, studies) -> list[BadInput]:
    command = ["certify", "--count", "2"]
    cases = [BadInput(kind, [*command, "--run", str(run)], ["--run", *names]) for kind, run, names in studies]
    return cases + _options(
        lambda: ["certify", "--run", str(made["run"])],
        [("choice", "--family", "noise"), ("choice", "--variant", "y"), ("choice", "--device", "tpu"),
         ("range", "--count", "0"), ("range", "--seed", "-1"), ("type", "--count", "few")],
    )  # fmt: skip


def evaluate_cases(made, studies) -> list[BadInput]:
    command = ["evaluate", "--per-family", "2", "--latency-batch", "1"]
    cases = [BadInput(kind, [*command, "--run", str(run)], ["--run", *names]) for kind, run, names in studies]
    cases.append(BadInput("type", [*command, "--run", str(made["run"]), "--out", str(made["notes"])], ["--out"]))
    return cases + _options(
        lambda: ["evaluate", "--run", str(made["run"])],
        [("choice", "--device", "tpu"), ("range", "--per-family", "1"), ("range", "--latency-batch", "0"),
         ("range", "--seed", "-1"), ("type", "--per-family", "x"), ("type", "--latency-batch", "big")],
    )  # fmt: skip


@pytest.fixture(scope="module")
def cases(made, studies) -> list[BadInput]:
    return [*train_cases(made), *certify_cases(made, studies), *evaluate_cases(made, studies)]


def test_bad_inputs_fail_cleanly_before_any_work(made, cases, one_thread):
    check_bad_inputs(app, cases, pickle_marker=made["root"] / "bad" / "PICKLE_RAN")
    assert not made["fresh"].exists(), "a refused `train` wrote into its --out"
    assert [p.name for p in made["notes"].iterdir()] == ["readme.txt"], "a refused command wrote into another folder"


def test_every_command_has_its_bad_inputs(cases):
    study = ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "nan", "shape"]
    kinds = {"train": ["mixing", "choice", "range", "type"], "certify": study, "evaluate": study}
    assert uncovered_commands(app, cases, kinds) == []


def test_overwrite_replaces_another_study(made, one_thread):
    run = made["root"] / "replaced"
    shutil.copytree(made["run"], run)
    res = CliRunner().invoke(app, ["train", "--out", str(run), *TINY, "--seed", "1", "--overwrite"])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "run.json").read_text())["study"]["seed"] == 1
