"""Bad input to `flowlab cells` and `flowlab dna`: every command refuses each kind that applies to it with one line
naming the argument or file (exit 2) before any work, and never runs a pickle's code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anndata as ad
import numpy as np
import pytest
from typer.testing import CliRunner

from flowlab.biology_dynamics.cli import cells_app, dna_app
from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands

#: bad_files' names -> their kind
FILE_KINDS = {"missing": "missing_file", "empty": "empty_file", "garbage": "corrupt_file",
              "truncated": "corrupt_file", "pickle": "pickle"}  # fmt: skip
TOY = ["--task", "toy-simplex", "--length", "2", "--width", "16", "--batch", "8"]


def _ok(app, *args: str) -> None:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output


def _course(times=(0.0, 1.0, 2.0), dim: int = 2, n: int = 10) -> ad.AnnData:
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(k, 0.3, size=(n, dim)) for k in range(len(times))]).astype(np.float32)
    adata = ad.AnnData(X=X)
    adata.obs["time"] = np.repeat(times, n)
    adata.obsm["X_emb"] = X
    return adata


def _h5ad(path: Path, adata: ad.AnnData) -> Path:
    adata.write_h5ad(path)
    return path


def _spoilt(good: Path, where: Path, pattern: str, content: bytes | None) -> Path:
    """A copy of the folder `good` at `where` whose files matching `pattern` hold `content` (None: deleted)."""
    shutil.copytree(good, where)
    for path in where.glob(pattern):
        path.unlink() if content is None else path.write_bytes(content)
    return where


def _file_cases(command: list[str], files: dict[str, Path], after: list[str] = ()) -> list[BadInput]:
    """Each bad file in place of the file argument: the error names the file."""
    return [BadInput(FILE_KINDS[name], [*command, str(path), *after], [path.name]) for name, path in files.items()]


def _folder_cases(command: list[str], argument: str, good: Path, root: Path, pattern: str, like: Path,
                  after: list[str] = ()) -> list[BadInput]:  # fmt: skip
    """The folder `good` with its files `pattern` (like the file `like`) missing, empty, garbage, truncated or a
    pickle: the error names the folder argument and the file."""
    files = bad_files(root / "bad_files", like.suffix, like=like)
    cases = []
    for name, path in files.items():
        content = None if name == "missing" else path.read_bytes()
        folder = _spoilt(good, root / f"{name}-{like.name}", pattern, content)
        cases.append(BadInput(FILE_KINDS[name], [*command, str(folder), *after], [argument, like.name]))
    return cases


def _weights(folder: Path) -> Path:
    return next(folder.rglob("weights.pt"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A fitted `cells` model and a trained `dna` run, each with the smallest settings."""
    root = tmp_path_factory.mktemp("runs")
    course = _h5ad(root / "course.h5ad", _course())
    _ok(cells_app, "fit", str(course), "--iters", "2", "--batch", "8", "--out", str(root / "model"))
    _ok(dna_app, "train", "--out", str(root / "dna"), *TOY, "--steps", "2")
    return {"course": course, "model": root / "model", "dna": root / "dna"}


def _bad_courses(root: Path) -> dict[str, Path]:
    """Readable time courses with the wrong content."""
    root.mkdir(parents=True, exist_ok=True)
    text_times = _course()
    text_times.obs["time"] = np.repeat(["a", "b", "c"], 10)
    nan = _course()
    nan.obsm["X_emb"][3, 1] = np.nan
    no_rep = _course()
    del no_rep.obsm["X_emb"]
    csv = {"header.csv": "day,x1\n0,1.0\n1,2.0\n", "text.csv": "samples,x1\n0,abc\n1,def\n",
           "nan.csv": "samples,x1\n0,1.0\n1,nan\n2,0.5\n", "nan_time.csv": "samples,x1\n0,1.0\nnan,2.0\n2,0.5\n",
           "only_time.csv": "samples\n0\n1\n2\n", "course.csv": "samples,x1\n0,1.0\n1,2.0\n"}  # fmt: skip
    for name, text in csv.items():
        (root / name).write_text(text)
    paths = {name: root / name for name in csv}
    paths |= {"text_times.h5ad": _h5ad(root / "text_times.h5ad", text_times),
              "nan.h5ad": _h5ad(root / "nan.h5ad", nan), "no_rep.h5ad": _h5ad(root / "no_rep.h5ad", no_rep),
              "dim3.h5ad": _h5ad(root / "dim3.h5ad", _course(dim=3)),
              "one_time.h5ad": _h5ad(root / "one_time.h5ad", _course(times=(1.0,))),
              "late.h5ad": _h5ad(root / "late.h5ad", _course(times=(5.0, 6.0)))}  # fmt: skip
    paths["csv_in_h5ad.h5ad"] = root / "csv_in_h5ad.h5ad"
    paths["csv_in_h5ad.h5ad"].write_text(csv["course.csv"])
    return paths


def _data_cases(command: list[str], root: Path, course: Path, after: list[str] = ()) -> list[BadInput]:
    """The time-course argument: bad .h5ad and .csv files and readable files with the wrong content."""
    courses = _bad_courses(root / "courses")
    cases = _file_cases(command, bad_files(root / "h5ad", ".h5ad", like=course), after)
    cases += _file_cases(command, bad_files(root / "csv", ".csv", like=courses["course.csv"]), after)
    kinds = {"header.csv": "wrong_content", "text.csv": "wrong_content", "csv_in_h5ad.h5ad": "wrong_content",
             "only_time.csv": "shape"}  # fmt: skip
    cases += [BadInput(kind, [*command, str(courses[name]), *after], ["DATA", name]) for name, kind in kinds.items()]
    kinds = {"text_times.h5ad": "wrong_content", "nan.csv": "nan", "nan_time.csv": "nan", "nan.h5ad": "nan"}
    cases += [BadInput(kind, [*command, str(courses[name]), *after], [name]) for name, kind in kinds.items()]
    cases.append(BadInput("wrong_content", [*command, str(courses["no_rep.h5ad"]), *after], ["--use-rep", "X_emb"]))
    return cases


def _model_cases(command: str, runs: dict[str, Path], root: Path) -> list[BadInput]:
    """The MODEL_DIR argument: no model, a broken checkpoint, another kind of run; the data: bad files too."""
    model, course = runs["model"], str(runs["course"])
    (root / "empty_dir").mkdir(parents=True)
    bad_config = _spoilt(model, root / "bad_config", "step-*/config.json", b"{not json")
    dna_weights = _spoilt(model, root / "dna_weights", "step-*/weights.pt", _weights(runs["dna"]).read_bytes())
    cases = _folder_cases([command], "MODEL_DIR", model, root, "step-*/weights.pt", _weights(model), [course])
    cases += [BadInput("missing_file", [command, str(root / "no_model"), course], ["MODEL_DIR", "no_model"]),
              BadInput("empty_file", [command, str(root / "empty_dir"), course], ["MODEL_DIR", "empty_dir"]),
              BadInput("corrupt_file", [command, str(bad_config), course], ["MODEL_DIR", "config.json"]),
              BadInput("wrong_content", [command, str(runs["dna"]), course], ["MODEL_DIR", "dna"]),
              BadInput("wrong_content", [command, str(dna_weights), course], ["MODEL_DIR", "weights.pt"])]  # fmt: skip
    cases += _data_cases([command, str(model)], root / "data", runs["course"])
    return cases


def test_cells_commands_refuse_bad_input(runs, tmp_path):
    model, course = str(runs["model"]), str(runs["course"])
    courses = _bad_courses(tmp_path / "courses")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not a run")
    out = ["--out", str(tmp_path / "fit")]
    fit = [*_data_cases(["fit"], tmp_path / "fit_data", runs["course"], out)]
    fit += [BadInput("type", ["fit", course, *out, option, value], [option])
            for option, value in (("--iters", "two"), ("--batch", "1.5"), ("--delta", "wide"), ("--hold-out", "x"),
                                  ("--seed", "s"))]  # fmt: skip
    fit += [BadInput("range", ["fit", course, *out, option, value], [option])
            for option, value in (("--iters", "0"), ("--batch", "-1"), ("--delta", "0"), ("--hold-out", "0"),
                                  ("--hold-out", "1.5"), ("--seed", str(2**64)))]  # fmt: skip
    fit += [BadInput("nan", ["fit", course, *out, option, "nan"], [option]) for option in ("--delta", "--hold-out")]
    fit += [
        BadInput("choice", ["fit", course, *out, "--config", "huge"], ["--config"]),
        BadInput("type", ["fit", course, *out, "--v-hidden", "wide"], ["--v-hidden"]),
        BadInput("type", ["fit", course, *out, "--plan-iters", "many"], ["--plan-iters"]),
        BadInput("range", ["fit", course, *out, "--g-hidden", "16,0"], ["--g-hidden"]),
        BadInput("range", ["fit", course, *out, "--config", "quick", "--plan-iters", "0"], ["--plan-iters"]),
        BadInput("choice", ["fit", course, *out, "--method", "ot_cfm", "--plan-iters", "5"], ["--plan-iters"]),
        BadInput("choice", ["fit", course, *out, "--plan-solver", "lbfgs"], ["--plan-solver"]),
        BadInput("choice", ["fit", course, *out, "--method", "ot_cfm", "--plan-solver", "sinkhorn"], ["--plan-solver"]),
        BadInput("choice", ["fit", course, *out, "--method", "ot_cfm", "--g-hidden", "8"], ["--g-hidden"]),
    ]
    fit += [BadInput("choice", ["fit", course, *out, option, value], [option])
            for option, value in (("--method", "sde"), ("--device", "gpu"), ("--time-key", "day"),
                                  ("--use-rep", "X_pca"))]  # fmt: skip
    fit += [BadInput("shape", ["fit", str(courses["one_time.h5ad"]), *out], ["--time-key"]),
            BadInput("mixing", ["fit", course, "--iters", "3", "--out", model], ["--out", "another run"]),
            BadInput("mixing", ["fit", course, "--iters", "2", "--batch", "8", "--out", model], ["--out", "--resume"]),
            BadInput("mixing", ["fit", course, "--out", str(runs["dna"])], ["--out", "another run"]),
            BadInput("mixing", ["fit", course, "--out", str(tmp_path / "foreign")], ["--out"]),
            BadInput("wrong_content", ["fit", course, "--out", course], ["--out"])]  # fmt: skip
    predict = _model_cases("predict", runs, tmp_path / "predict")
    predict += [
        BadInput("range", ["predict", model, course, option, value], [option])
        for option, value in (("--from", "9"), ("--from", "0.5"), ("--times", "0,9"), ("--times", "-1"))
    ]
    predict += [
        BadInput("nan", ["predict", model, course, option, "nan"], [option]) for option in ("--from", "--times")
    ]
    predict += [BadInput("type", ["predict", model, course, option, value], [option])
                for option, value in (("--from", "first"), ("--times", "1,x"), ("--times", "1;2"))]  # fmt: skip
    predict += [BadInput("choice", ["predict", model, course, option, "nope"], [option])
                for option in ("--time-key", "--use-rep")]  # fmt: skip
    predict.append(BadInput("shape", ["predict", model, str(courses["dim3.h5ad"])], ["DATA"]))
    evaluate = _model_cases("evaluate", runs, tmp_path / "evaluate")
    evaluate += [BadInput("choice", ["evaluate", model, course, option, "nope"], [option])
                 for option in ("--time-key", "--use-rep")]  # fmt: skip
    evaluate += [BadInput("shape", ["evaluate", model, str(courses["dim3.h5ad"])], ["DATA"]),
                 BadInput("shape", ["evaluate", model, str(courses["one_time.h5ad"])], ["--time-key"]),
                 BadInput("range", ["evaluate", model, str(courses["late.h5ad"])], ["DATA"])]  # fmt: skip
    cases = fit + predict + evaluate
    check_bad_inputs(cells_app, cases, pickle_marker=tmp_path / "predict" / "bad_files" / "PICKLE_RAN")
    assert not list(tmp_path.rglob("PICKLE_RAN"))
    assert not (tmp_path / "fit").exists()  # every refusal came before any work
    every = {"missing_file", "empty_file", "corrupt_file", "wrong_content", "nan", "shape", "choice"}
    kinds = {"fit": every | {"type", "range", "mixing"}, "predict": every | {"pickle", "type", "range"},
             "evaluate": every | {"pickle", "range"}}  # fmt: skip
    assert uncovered_commands(cells_app, cases, kinds) == []


def _run_cases(command: str, runs: dict[str, Path], root: Path) -> list[BadInput]:
    """The FOLDER argument: no run, broken settings or checkpoint, another kind of run, weights of another shape."""
    dna = runs["dna"]
    (root / "empty_dir").mkdir(parents=True)
    cases = _folder_cases([command], "FOLDER", dna, root, "step-*/weights.pt", _weights(dna))
    cases += _folder_cases([command], "FOLDER", dna, root, "run.json", dna / "run.json")
    settings = json.loads((dna / "run.json").read_text())
    wider = json.dumps({**settings, "width": 32}).encode()
    cases += [BadInput("missing_file", [command, str(root / "no_run")], ["FOLDER", "no_run"]),
              BadInput("empty_file", [command, str(root / "empty_dir")], ["FOLDER", "empty_dir"]),
              BadInput("corrupt_file", [command, str(_spoilt(dna, root / "bad_config", "step-*/config.json",
                                                             b"{not json"))], ["FOLDER", "config.json"]),
              BadInput("wrong_content", [command, str(runs["model"])], ["FOLDER", "run.json"]),
              BadInput("wrong_content", [command, str(_spoilt(dna, root / "list", "run.json", b"[1, 2]"))],
                       ["FOLDER", "run.json"]),
              BadInput("shape", [command, str(_spoilt(dna, root / "wider", "run.json", wider))],
                       ["FOLDER", "run.json"])]  # fmt: skip
    run = str(dna)
    cases += [BadInput("type", [command, run, option, value], [option])
              for option, value in (("--n", "many"), ("--steps", "2.5"), ("--seed", "s"))]  # fmt: skip
    cases += [BadInput("range", [command, run, option, value], [option])
              for option, value in (("--n", "0"), ("--steps", "-1"), ("--seed", str(2**64)))]  # fmt: skip
    cases += [BadInput("choice", [command, run, option, value], [option])
              for option, value in (("--domain", "masked"), ("--domain", "nope"), ("--device", "gpu"))]  # fmt: skip
    return cases


def test_dna_commands_refuse_bad_input(runs, tmp_path):
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not a run")
    out = ["--out", str(tmp_path / "train")]
    train = [BadInput("choice", ["train", *out, option, value], [option])
             for option, value in (("--task", "proteins"), ("--domain", "nope"), ("--device", "gpu"))]  # fmt: skip
    train += [BadInput("type", ["train", *out, *TOY, option, value], [option])
              for option, value in (("--letters", "four"), ("--length", "2.5"), ("--classes", "x"), ("--steps", "s"),
                                    ("--batch", "b"), ("--lr", "fast"), ("--width", "w"), ("--stacks", "1.5"),
                                    ("--seed", "s"))]  # fmt: skip
    train += [BadInput("range", ["train", *out, *TOY, option, value], [option])
              for option, value in (("--letters", "1"), ("--length", "0"), ("--steps", "0"), ("--batch", "0"),
                                    ("--lr", "-1"), ("--lr", "inf"), ("--width", "0"), ("--stacks", "0"),
                                    ("--seed", str(2**64)), ("--seed", str(-(2**63) - 1)))]  # fmt: skip
    train += [
        BadInput("range", ["train", *out, "--classes", value, "--length", "40"], ["--classes"]) for value in ("0", "9")
    ]
    train += [BadInput("range", ["train", *out, "--length", "5"], ["--length"]),
              BadInput("range", ["train", *out, "--letters", "5"], ["--letters"]),
              BadInput("range", ["train", "--out", str(runs["dna"]), *TOY, "--steps", "1", "--resume"], ["--steps"]),
              BadInput("nan", ["train", *out, *TOY, "--lr", "nan"], ["--lr"]),
              BadInput("mixing", ["train", "--out", str(runs["dna"]), *TOY, "--width", "32"], ["--out"]),
              BadInput("mixing", ["train", "--out", str(runs["dna"]), *TOY, "--steps", "2"], ["--out", "--resume"]),
              BadInput("mixing", ["train", "--out", str(runs["dna"]), *TOY, "--resume", "--overwrite"], ["not both"]),
              BadInput("mixing", ["train", "--out", str(runs["model"]), *TOY], ["--out"]),
              BadInput("mixing", ["train", "--out", str(tmp_path / "foreign"), *TOY], ["--out"]),
              BadInput("wrong_content", ["train", "--out", str(runs["course"]), *TOY], ["--out"])]  # fmt: skip
    sample = _run_cases("sample", runs, tmp_path / "sample")
    sample += [BadInput("range", ["sample", str(runs["dna"]), "--class", "0"], ["--class"]),
               BadInput("type", ["sample", str(runs["dna"]), "--class", "first"], ["--class"])]  # fmt: skip
    evaluate = _run_cases("evaluate", runs, tmp_path / "evaluate")
    cases = train + sample + evaluate
    check_bad_inputs(dna_app, cases, pickle_marker=tmp_path / "sample" / "bad_files" / "PICKLE_RAN")
    assert not list(tmp_path.rglob("PICKLE_RAN"))
    assert not (tmp_path / "train").exists()
    every = {"missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "shape", "type", "range",
             "choice"}  # fmt: skip
    kinds = {"train": {"type", "range", "nan", "choice", "mixing"}, "sample": every, "evaluate": every}
    assert uncovered_commands(dna_app, cases, kinds) == []
