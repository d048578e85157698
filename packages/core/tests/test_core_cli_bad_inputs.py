"""`flowlab manifold train|sample|evaluate` meet every kind of bad input (`flowlab.core.testing.bad_input`): one
error naming the option or file, exit 2, before any work. The runs read are one tiny torus run and copies of it with
one file spoiled; the earth cases use a data root of bad files, so none needs the shared data."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.gfm.cli import app
from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands

TINY = ["--steps", "2", "--batch-size", "8", "--hidden", "8,8", "--no-progress"]
#: 11 rows of 3 angles: the first half of the file ends inside a row
ANGLES = "".join(f"0.{i},-1.{i},2.{i}\n" for i in range(11))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run trained on torus:2 for two steps, sampled and evaluated cleanly; beside it `circle`, one on torus:1 (no
    2-D chart to plot)."""
    run = tmp_path_factory.mktemp("runs") / "torus"
    runner = CliRunner()
    for data, folder in (("torus:2", run), ("torus:1", run.parent / "circle")):
        res = runner.invoke(app, ["train", "--data", data, "--out", str(folder), *TINY])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["sample", "--run", str(run), "--out", str(run.parent / "x.pt"), "--n", "4"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--nfe", "1", "--n", "8", "--nll-steps", "1"])
    assert res.exit_code == 0, res.output
    return run


def _file(folder: Path, name: str, content: str | bytes) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def _train_cases(run: Path, folder: Path) -> list[BadInput]:
    out = str(folder / "new")

    def case(kind, names, *args, data="torus:2"):
        return BadInput(kind, ["train", "--data", data, "--out", out, *TINY, *args], names)

    cases = [case("choice", ["--objective"], "--objective", "gan"), case("choice", ["--device"], "--device", "tpu"),
             case("choice", ["--data"], data="mars"), case("choice", ["--data"], data="earth:moon"),
             case("choice", ["--data"], data="latlon:"),
             case("range", ["--data"], data="torus:0"), case("type", ["--data"], data="torus:two"),
             case("type", ["--steps"], "--steps", "ten"), case("type", ["--batch-size"], "--batch-size", "x"),
             case("type", ["--hidden"], "--hidden", "16,x"), case("type", ["--lr"], "--lr", "fast"),
             case("type", ["--fourier-dim"], "--fourier-dim", "1.5"), case("type", ["--seed"], "--seed", "x"),
             case("range", ["--seed"], "--seed", str(2**65)), case("range", ["--steps"], "--steps", "0"),
             case("range", ["--batch-size"], "--batch-size", "-1"),
             case("range", ["--hidden"], "--hidden", "0,16"), case("range", ["--lr"], "--lr", "0"),
             case("range", ["--lr"], "--lr", "-1e-3"), case("range", ["--fourier-dim"], "--fourier-dim", "-1"),
             case("range", ["--fourier-scale"], "--fourier-scale", "0"), case("nan", ["--lr"], "--lr", "nan"),
             case("nan", ["--lr"], "--lr", "inf"),
             case("nan", ["--fourier-scale"], "--fourier-scale", "nan")]  # fmt: skip
    if not torch.cuda.is_available():
        cases.append(case("range", ["--device"], "--device", "cuda:0"))
    angles = folder / "angles"
    bad = bad_files(angles, ".csv", like=_file(angles, "good.csv", ANGLES))
    tables = [("missing_file", bad["missing"]), ("empty_file", bad["empty"]), ("corrupt_file", bad["garbage"]),
              ("corrupt_file", bad["truncated"]),
              ("wrong_content", _file(angles, "header.csv", "phi,psi,omega\n" + ANGLES)),
              ("wrong_content", _file(angles, "text.csv", "left,right\nup,down\n")),
              ("nan", _file(angles, "nan.csv", ANGLES + "nan,0.1,0.2\n")),
              ("shape", _file(angles, "ragged.csv", ANGLES + "0.1,0.2\n")),
              ("range", _file(angles, "degrees.csv", "-65,140,170\n" + ANGLES))]  # fmt: skip
    cases += [case(kind, ["--data", Path(path).name], data=f"angles:{path}") for kind, path in tables]
    cases += [case("choice", ["--angle-unit"], "--angle-unit", "grads"),
              case("choice", ["--data", "--angle-unit"], "--angle-unit", "degrees", data="torus:2")]  # fmt: skip
    earth = folder / "earth"
    roots = [("missing_file", earth / "nowhere"), ("empty_file", earth / "empty", ""),
             ("corrupt_file", earth / "garbage", bad["garbage"].read_bytes()),
             ("corrupt_file", earth / "truncated", "10.5,20.25\n-30.1"),
             ("wrong_content", earth / "columns", "10.5,20.25,3.0\n"),
             ("wrong_content", earth / "lonlat", "120.5,10.0\n"), ("nan", earth / "nan", "10.5,nan\n"),
             ("shape", earth / "single", "10.5\n20.5\n")]  # fmt: skip
    for kind, root, *content in roots:  # each bad file twice: under a data root, and named by latlon:PATH
        if content:
            _file(root / "earth_sphere", "volcano.csv", content[0])
        cases.append(case(kind, ["--data-root", "volcano.csv"], "--data-root", str(root), data="earth:volcano"))
        cases.append(case(kind, ["--data", "volcano.csv"], data=f"latlon:{root / 'earth_sphere' / 'volcano.csv'}"))
    foreign = folder / "foreign"
    _file(foreign, "notes.txt", "not a run")
    return [*cases, BadInput("mixing", ["train", "--data", "torus:3", "--out", str(run), *TINY], ["--out"]),
            BadInput("mixing", ["train", "--data", "torus:2", "--out", str(run), *TINY], ["--out", "--resume"]),
            BadInput("mixing", ["train", "--data", "torus:2", "--out", str(foreign), *TINY], ["--out"])]  # fmt: skip


def _spoiled_runs(run: Path, folder: Path) -> list[tuple[str, str, list[str]]]:
    """(kind, run folder, names) of copies of `run` with config.json or model.pt missing or spoiled."""
    meta = json.loads((run / "config.json").read_text())
    state = torch.load(run / "model.pt", weights_only=True)
    first = next(iter(state))
    bad = bad_files(folder / "files", ".pt", like=run / "model.pt")
    text = (run / "config.json").read_text()
    spoiled = [("config.json", "missing_file", None, []), ("config.json", "empty_file", "", []),
               ("config.json", "corrupt_file", bad["garbage"].read_bytes(), []),
               ("config.json", "corrupt_file", text[: len(text) // 2], []),
               ("config.json", "wrong_content", [1, 2], []),
               ("config.json", "wrong_content", {k: v for k, v in meta.items() if k != "config"}, ["config"]),
               ("config.json", "wrong_content", {**meta, "data": "mars"}, ["data"]),
               ("config.json", "wrong_content", {**meta, "seed": "x"}, ["seed"]),
               ("config.json", "wrong_content", {**meta, "config": {**meta["config"], "depth": 3}}, ["depth"]),
               ("config.json", "range", {**meta, "config": {**meta["config"], "hidden": [-1]}}, ["hidden"]),
               ("config.json", "nan", {**meta, "config": {**meta["config"], "lr": math.nan}}, ["lr"]),
               ("model.pt", "missing_file", None, []), ("model.pt", "empty_file", b"", []),
               ("model.pt", "corrupt_file", bad["garbage"].read_bytes(), []),
               ("model.pt", "corrupt_file", bad["truncated"].read_bytes(), []),
               ("model.pt", "pickle", bad["pickle"].read_bytes(), []),
               ("model.pt", "wrong_content", state[first], []),
               ("model.pt", "wrong_content", {"weight": state[first]}, []),
               ("model.pt", "shape", {**state, first: state[first][..., :1]}, [first]),
               ("model.pt", "nan", {k: torch.full_like(v, math.nan) for k, v in state.items()}, [])]  # fmt: skip
    runs = [("missing_file", str(folder / "nowhere"), ["nowhere"])]
    for i, (file, kind, content, names) in enumerate(spoiled):
        copy = folder / f"run{i}"
        shutil.copytree(run, copy)
        (copy / file).unlink()
        if isinstance(content, str | bytes):
            _file(copy, file, content)
        elif file == "config.json":
            _file(copy, file, json.dumps(content))
        elif content is not None:
            torch.save(content, copy / file)
        runs.append((kind, str(copy), [file, *names]))
    return runs


def _sample_cases(run: Path, spoiled, folder: Path) -> list[BadInput]:
    def case(kind, names, *args, run=str(run)):
        return BadInput(kind, ["sample", "--run", run, "--out", str(folder / "x.pt"), *args], names)

    cases = [case(kind, ["--run", *names], run=path) for kind, path, names in spoiled]
    circle = str(run.parent / "circle")
    return [*cases, case("choice", ["--out"], "--out", str(folder / "x.txt")),
            case("choice", ["--sampler"], "--sampler", "heun"), case("choice", ["--device"], "--device", "tpu"),
            case("choice", ["--coords"], "--coords", "xyz"),
            case("choice", ["--coords", "2-sphere", "FlatTorus(2)"], "--coords", "latlon"),
            case("choice", ["--plot", "fig.jpg"], "--plot", str(folder / "fig.jpg")),
            case("choice", ["--plot", "fig"], "--plot", str(folder / "fig")),
            case("choice", ["--plot", "FlatTorus(1)"], "--plot", str(folder / "fig.png"), run=circle),
            case("type", ["--n"], "--n", "few"), case("type", ["--nfe"], "--nfe", "1.5"),
            case("type", ["--seed"], "--seed", "x"), case("range", ["--seed"], "--seed", str(-(2**64))),
            case("range", ["--n"], "--n", "0"),
            case("range", ["--nfe"], "--nfe", "0"), case("range", ["--nfe"], "--nfe", "-2")]  # fmt: skip


def _evaluate_cases(run: Path, spoiled, folder: Path) -> list[BadInput]:
    def case(kind, names, *args, run=str(run)):
        return BadInput(kind, ["evaluate", "--run", run, "--out", str(folder / "m.json"), *args], names)

    cases = [case(kind, ["--run", *names], run=path) for kind, path, names in spoiled]
    return [*cases, case("choice", ["--sampler"], "--sampler", "heun"), case("type", ["--nfe"], "--nfe", "1,x"),
            case("type", ["--n"], "--n", "few"), case("type", ["--nll-steps"], "--nll-steps", "2.5"),
            case("type", ["--seed"], "--seed", "x"), case("range", ["--seed"], "--seed", str(2**64)),
            case("range", ["--nfe"], "--nfe", "0,2"),
            case("range", ["--nfe"], "--nfe", ""), case("range", ["--n"], "--n", "0"),
            case("range", ["--nll-steps"], "--nll-steps", "0")]  # fmt: skip


def test_every_command_refuses_bad_input_cleanly(run, tmp_path):
    spoiled = _spoiled_runs(run, tmp_path / "runs")
    cases = _train_cases(run, tmp_path / "train") + _sample_cases(run, spoiled, tmp_path / "sample")
    cases += _evaluate_cases(run, spoiled, tmp_path / "evaluate")
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "runs" / "files" / "PICKLE_RAN")
    assert uncovered_commands(app, cases) == []
    assert not (tmp_path / "train" / "new" / "model.pt").exists() and not (tmp_path / "sample" / "x.pt").exists()
    assert not (tmp_path / "evaluate" / "m.json").exists()  # refused before any work
    assert not list((tmp_path / "sample").glob("fig*"))
    res = CliRunner().invoke(app, ["sample", "--run", str(run), "--out", str(tmp_path / "x.pt"), "--n", "4"])
    assert res.exit_code == 0, res.output  # the run another one was refused in is intact
