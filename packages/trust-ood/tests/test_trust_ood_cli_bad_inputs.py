"""`flowlab trust`: every command refuses bad input (options, trained-study folders, the user's arrays and regressor
weights, output folders) with one error line naming the option or file, exit status 2, before any work
(`flowlab.core.testing`'s bad-input kit)."""

from __future__ import annotations

import io
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.trust_ood.certificate.pde1d import PDEConfig, generate
from flowlab.trust_ood.cli import app

STEPS = ["--regressor-steps", "1", "--score-steps", "1", "--regressor", "cnn", "--ode-steps", "1"]
TINY = ["--pairs", "8", *STEPS]
#: a study on the user's arrays (`--data`: 24 heat pairs), 8 of them held out for the threshold
TINY_DATA = ["--calib", "8", *STEPS]
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


def _npz(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """The smallest trained studies (CNN, one step each) of the heat PDE and of heat arrays (`--data`), the bad
    weight and npz files made from them, a folder that is not a run, and where no refused command may write."""
    root = tmp_path_factory.mktemp("trust_bad_inputs")
    heat = generate(PDEConfig.default("heat", 32), "id", 24, seed=0)
    data = _npz(root / "data.npz", inputs=heat.u0, outputs=heat.u_final)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    res = CliRunner().invoke(app, ["train", "--out", str(root / "run"), *TINY])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["train", "--out", str(root / "user"), "--data", str(data), *TINY_DATA])
    torch.set_num_threads(threads)
    assert res.exit_code == 0, res.output
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not a run")
    paths = {"root": root, "run": root / "run", "user": root / "user", "data": data, "notes": root / "notes",
             "fresh": root / "fresh"}  # fmt: skip
    npz = {f"{name}_npz": path for name, path in bad_files(root / "bad", ".npz", like=data).items()}
    return paths | npz | bad_files(root / "bad", ".pt", like=root / "run" / "joint.pt")


@pytest.fixture(scope="module")
def arrays(made) -> dict[str, list[tuple[str, Path]]]:
    """Bad array files and folders: "inputs" bad for --data and --inputs alike, "pairs" bad only as --data pairs."""
    root, good = made["root"] / "arrays", np.load(made["data"])
    x, y = good["inputs"], good["outputs"]
    pickled = root / "pickled_npy"
    pickled.mkdir(parents=True)
    pickled.joinpath("inputs.npy").write_bytes(made["pickle_npz"].read_bytes())
    np.save(pickled / "outputs.npy", y)
    nan = x.copy()
    nan[3, 5] = np.nan
    inputs = [("missing_file", made["missing_npz"]), ("empty_file", made["empty_npz"]),
              ("corrupt_file", made["garbage_npz"]), ("corrupt_file", made["truncated_npz"]),
              ("pickle", made["pickle_npz"]), ("pickle", pickled),
              ("pickle", _npz(root / "objects.npz", inputs=np.array([{"a": 1}], dtype=object), outputs=y)),
              ("wrong_content", _npz(root / "other_keys.npz", u0=x, u_final=y)),
              ("wrong_content", _npz(root / "text.npz", inputs=np.array([["a", "b"]]), outputs=y)),
              ("nan", _npz(root / "nan.npz", inputs=nan, outputs=y)),
              ("shape", _npz(root / "channels.npz", inputs=x[:, None], outputs=y[:, None])),
              ("shape", _npz(root / "odd_grid.npz", inputs=x[:, :31], outputs=y[:, :31]))]  # fmt: skip
    pairs = [("wrong_content", _npz(root / "no_outputs.npz", inputs=x)),
             ("nan", _npz(root / "inf_outputs.npz", inputs=x, outputs=np.where(nan == nan, y, np.inf))),
             ("shape", _npz(root / "mismatched_n.npz", inputs=x, outputs=y[:-1]))]  # fmt: skip
    return {"inputs": inputs, "pairs": pairs}


@pytest.fixture(scope="module")
def psi_weights(made) -> list[tuple[str, Path]]:
    """Bad `--regressor-weights` files (the runs' Psi is a CNN of width 16)."""
    root = made["root"] / "psi"
    root.mkdir()
    state = torch.load(made["run"] / "regressor_0.pt", weights_only=True)
    (root / "nan.pt").write_bytes(_tensors(**state | {"project.bias": torch.full((1,), float("nan"))}))
    (root / "shape.pt").write_bytes(_tensors(**state | {"project.bias": torch.zeros(3)}))
    files = [(kind, made[name]) for name, kind in WEIGHTS.items()]
    return [*files, ("missing_file", made["missing"]), ("nan", root / "nan.pt"), ("shape", root / "shape.pt"),
            ("wrong_content", made["run"] / "joint.pt")]  # fmt: skip


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


@pytest.fixture(scope="module")
def user_studies(made) -> list[tuple[str, Path, list[str]]]:
    """Copies of the study on arrays with its calibration inputs bad: (kind, folder, what the error must name)."""
    run, root = made["user"], made["root"] / "user_studies"
    calib = torch.load(run / "calib.pt", weights_only=True)["inputs"]
    edits = [("missing_file", None), ("corrupt_file", made["garbage"].read_bytes()),
             ("pickle", made["pickle"].read_bytes()), ("wrong_content", _tensors(x=calib)),
             ("nan", _tensors(inputs=calib * float("nan"))), ("shape", _tensors(inputs=calib[:, 0]))]  # fmt: skip
    return [(kind, _edited(run, root / f"{i}", "calib.pt", content), ["calib.pt"])
            for i, (kind, content) in enumerate(edits)]  # fmt: skip


def _options(args, options: list[tuple[str, str, str]]) -> list[BadInput]:
    """`args()` plus one bad option each: (kind, option, value), the error naming the option."""
    return [BadInput(kind, [*args(), option, value], [option]) for kind, option, value in options]


def train_cases(made, arrays, psi_weights) -> list[BadInput]:
    outs = itertools.count()

    def args(out: Path | None = None) -> list[str]:
        return ["train", "--out", str(out or made["fresh"] / f"{next(outs)}"), *TINY]

    def on(data: Path, *extra: str, out: Path | None = None) -> list[str]:
        return ["train", "--out", str(out or made["fresh"] / f"{next(outs)}"), *TINY_DATA, "--data", str(data), *extra]

    bad_data = [BadInput(kind, on(path), ["--data", path.name]) for kind, path in arrays["inputs"] + arrays["pairs"]]
    bad_psi = [BadInput(kind, on(made["data"], "--regressor-weights", str(path)), ["--regressor-weights", path.name])
               for kind, path in psi_weights]  # fmt: skip
    return [
        *bad_data,
        *bad_psi,
        BadInput("range", on(made["data"], "--calib", "23"), ["--data", "24 pairs"]),
        BadInput("mixing", on(made["data"], "--seed", "1", out=made["user"]), ["--out", "another run"]),
        BadInput("mixing", [*args(made["run"]), "--pde", "burgers"], ["--out", "another run"]),
        BadInput("mixing", args(made["run"]), ["--out", "--resume"]),
        BadInput("mixing", args(made["notes"]), ["--out", "notes"]),
        *_options(args, [("choice", "--pde", "wave"), ("choice", "--regressor", "mlp"), ("choice", "--device", "tpu"),
                           ("range", "--n", "30"), ("range", "--n", "33"), ("range", "--pairs", "0"),
                           ("range", "--regressor-steps", "0"), ("range", "--score-steps", "0"),
                           ("range", "--ode-steps", "0"), ("range", "--seed", "-1"), ("type", "--n", "big"),
                           ("type", "--pairs", "many"), ("type", "--score-steps", "1.5")]),
    ]  # fmt: skip


def certify_cases(made, studies, arrays, user_studies) -> list[BadInput]:
    command = ["certify", "--count", "2"]
    cases = [BadInput(kind, [*command, "--run", str(run)], ["--run", *names]) for kind, run, names in studies]
    mine = ["certify", "--inputs", str(made["data"])]
    cases += [BadInput(kind, [*mine, "--run", str(run)], ["--run", *names]) for kind, run, names in user_studies]
    user = ["certify", "--run", str(made["user"]), "--inputs"]
    cases += [BadInput(kind, [*user, str(path)], ["--inputs", path.name]) for kind, path in arrays["inputs"]]
    return cases + _options(
        lambda: ["certify", "--run", str(made["run"])],
        [("choice", "--family", "noise"), ("choice", "--variant", "y"), ("choice", "--device", "tpu"),
         ("range", "--count", "0"), ("range", "--seed", "-1"), ("type", "--count", "few")],
    )  # fmt: skip


def evaluate_cases(made, studies) -> list[BadInput]:
    command = ["evaluate", "--per-family", "2", "--latency-batch", "1"]
    cases = [BadInput(kind, [*command, "--run", str(run)], ["--run", *names]) for kind, run, names in studies]
    cases.append(BadInput("wrong_content", [*command, "--run", str(made["user"])], ["--run", "trained on --data"]))
    cases.append(BadInput("type", [*command, "--run", str(made["run"]), "--out", str(made["notes"])], ["--out"]))
    return cases + _options(
        lambda: ["evaluate", "--run", str(made["run"])],
        [("choice", "--device", "tpu"), ("range", "--per-family", "1"), ("range", "--latency-batch", "0"),
         ("range", "--seed", "-1"), ("type", "--per-family", "x"), ("type", "--latency-batch", "big")],
    )  # fmt: skip


@pytest.fixture(scope="module")
def cases(made, studies, arrays, psi_weights, user_studies) -> list[BadInput]:
    return [*train_cases(made, arrays, psi_weights), *certify_cases(made, studies, arrays, user_studies),
            *evaluate_cases(made, studies)]  # fmt: skip


def test_bad_inputs_fail_cleanly_before_any_work(made, cases, one_thread):
    check_bad_inputs(app, cases, pickle_marker=made["root"] / "bad" / "PICKLE_RAN")
    assert not made["fresh"].exists(), "a refused `train` wrote into its --out"
    assert [p.name for p in made["notes"].iterdir()] == ["readme.txt"], "a refused command wrote into another folder"


def test_every_command_has_its_bad_inputs(cases):
    study = ["missing_file", "empty_file", "corrupt_file", "pickle", "wrong_content", "nan", "shape"]
    kinds = {"train": [*study, "mixing", "choice", "range", "type"], "certify": study, "evaluate": study}
    assert uncovered_commands(app, cases, kinds) == []


def test_overwrite_replaces_another_study(made, one_thread):
    run = made["root"] / "replaced"
    shutil.copytree(made["run"], run)
    res = CliRunner().invoke(app, ["train", "--out", str(run), *TINY, "--seed", "1", "--overwrite"])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "run.json").read_text())["study"]["seed"] == 1
