"""`flowlab rl`: every command refuses bad input (files, options, run folders) with one error line naming the option
or file, exit status 2, before any work (`flowlab.core.testing`'s bad-input kit)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.rl_control.cli import app

FILE_KINDS = {"missing": "missing_file", "empty": "empty_file", "garbage": "corrupt_file",
              "truncated": "corrupt_file", "pickle": "pickle"}  # fmt: skip


def _ok(args: list[str]) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output


def _npz(path: Path, like: Path | None = None, **arrays: np.ndarray) -> Path:
    """An npz at `path`: the fields of the dataset `like` with `arrays` replacing (or adding) some."""
    fields = dict(np.load(like)) if like is not None else {}
    np.savez(path, **{**fields, **arrays})
    return path


def _edited_run(src: Path, dest: Path, file: str, content: bytes | None) -> Path:
    """A copy of the run folder `src` at `dest` whose `file` (a path inside it) holds `content` (None: removed)."""
    shutil.copytree(src, dest)
    if content is None:
        (dest / file).unlink()
    else:
        (dest / file).write_bytes(content)
    return dest


def _record(run: Path, **changes) -> bytes:
    """`run`'s run.json with `changes` made to its sections (`section={key: value}`) or top-level keys."""
    meta = json.loads((run / "run.json").read_text())
    for key, value in changes.items():
        meta[key] = {**meta[key], **value} if isinstance(value, dict) else value
    return json.dumps(meta).encode()


def _hdf5(path: Path, like: Path, drop: tuple[str, ...] = (), **arrays: np.ndarray) -> Path:
    """A flat HDF5 file at `path`: the datasets of the file `like` without `drop`, `arrays` replacing some."""
    with h5py.File(like) as src, h5py.File(path, "w") as dest:
        for key, value in {**{k: src[k][()] for k in src if k not in drop}, **arrays}.items():
            dest[key] = value
    return path


def _minari_files(root: Path, write_minari, episodes: list[dict[str, np.ndarray]]) -> dict[str, Path]:
    """A good Minari folder of `episodes` and bad ones: an episode's observations as many as its actions, an episode
    without rewards, NaN observations, and a folder without Minari data."""
    ragged = [{**ep, "observations": ep["observations"][:-1]} if i == 1 else ep for i, ep in enumerate(episodes)]
    nan = [{**ep, "observations": np.where(ep["observations"] > 1, np.nan, ep["observations"])} for ep in episodes]
    fields = [{k: v for k, v in ep.items() if k != "rewards"} for ep in episodes]
    (root / "m_nodata").mkdir(parents=True)
    return {"minari": write_minari(root / "minari", episodes), "m_ragged": write_minari(root / "m_ragged", ragged),
            "m_nan": write_minari(root / "m_nan", nan), "m_fields": write_minari(root / "m_fields", fields),
            "m_nodata": root / "m_nodata"}  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory, make_episodes, write_minari, write_d4rl) -> dict[str, Path]:
    """The smallest good inputs: a pendulum dataset (also as a D4RL-style HDF5 file and a Minari folder) and a
    one-step TD run on it, an xor dataset and a one-step MAC-Flow run on it, and the bad files made from them."""
    root = tmp_path_factory.mktemp("rl_bad_inputs")
    paths = {"root": root, "pendulum.npz": root / "pendulum.npz", "xor.npz": root / "xor.npz", "run": root / "run",
             "mrun": root / "mrun", "fresh": root / "fresh"}  # fmt: skip
    _ok(["collect", "--quality", "random", "--transitions", "64", "--out", str(paths["pendulum.npz"])])
    _ok(["train", "--dataset", str(paths["pendulum.npz"]), "--method", "td", "--steps", "1", "--batch-size", "8",
         "--out", str(paths["run"])])  # fmt: skip
    _ok(["marl-collect", "--env", "xor", "--transitions", "32", "--out", str(paths["xor.npz"])])
    _ok(["marl-train", "--dataset", str(paths["xor.npz"]), "--env", "xor", "--hidden", "8", "--steps", "1",
         "--batch-size", "8", "--out", str(paths["mrun"])])  # fmt: skip
    _ok(["marl-collect", "--env", "xor", "--transitions", "32", "--seed", "1", "--out", str(root / "xor_1.npz")])
    bad = root / "bad"
    paths.update({f"{k}.npz": v for k, v in bad_files(bad, ".npz", like=paths["pendulum.npz"]).items()})
    paths.update({f"x_{k}.npz": v for k, v in bad_files(bad / "x", ".npz", like=paths["xor.npz"]).items()})
    weights = next(paths["run"].glob("step-*/weights.pt"))
    paths.update({f"{k}.pt": v for k, v in bad_files(bad, ".pt", like=weights).items()})
    paths["marker"] = bad / "PICKLE_RAN"
    paths["x_marker"] = bad / "x" / "PICKLE_RAN"
    paths["fields.npz"] = _npz(bad / "fields.npz", x=np.zeros(3))
    np.save(bad / "array.npy", np.zeros((4, 3)))
    paths["array.npz"] = (bad / "array.npy").rename(bad / "array.npz")
    rewards = np.load(paths["pendulum.npz"])["rewards"]
    paths["nan.npz"] = _npz(
        bad / "nan.npz", paths["pendulum.npz"], rewards=np.where(np.arange(64) == 5, np.nan, rewards)
    )
    obs = {
        k: np.pad(np.load(paths["pendulum.npz"])[k], ((0, 0), (0, 1))) for k in ("observations", "next_observations")
    }
    paths["obs4.npz"] = _npz(bad / "obs4.npz", paths["pendulum.npz"], **obs)
    paths["rewards2d.npz"] = _npz(bad / "rewards2d.npz", paths["pendulum.npz"], rewards=np.stack([rewards, rewards], 1))
    x = np.load(paths["xor.npz"])
    paths["x_nan.npz"] = _npz(bad / "x_nan.npz", paths["xor.npz"], rewards=np.full(len(x["rewards"]), np.nan))
    three = {k: np.concatenate([x[k], x[k][:, :1]], 1) for k in ("observations", "next_observations", "actions")}
    paths["x_agents3.npz"] = _npz(bad / "x_agents3.npz", paths["xor.npz"], **three)
    p = dict(np.load(paths["pendulum.npz"]))
    d4rl = {k: p[k] for k in ("observations", "actions", "rewards", "next_observations")}
    paths["d4rl.hdf5"] = write_d4rl(root / "d4rl.hdf5", {**d4rl, "terminals": p["terminations"],
                                                          "timeouts": p["truncations"]})  # fmt: skip
    paths.update({f"h_{k}.hdf5": v for k, v in bad_files(bad / "h", ".hdf5", like=paths["d4rl.hdf5"]).items()})
    paths["h_marker"] = bad / "h" / "PICKLE_RAN"
    paths["h_fields.hdf5"] = _hdf5(bad / "h_fields.hdf5", paths["d4rl.hdf5"], drop=("timeouts",))
    paths["h_ragged.hdf5"] = _hdf5(bad / "h_ragged.hdf5", paths["d4rl.hdf5"], actions=p["actions"][:-1])
    paths["h_nan.hdf5"] = _hdf5(bad / "h_nan.hdf5", paths["d4rl.hdf5"], rewards=np.full(64, np.nan))
    paths.update(_minari_files(root, write_minari, make_episodes([5, 3])))
    (bad / "data.csv").write_text("observations,actions\n0,0\n")
    paths["data.csv"] = bad / "data.csv"
    torch.save({"x": torch.zeros(2)}, bad / "other.pt")
    paths["other.pt"] = bad / "other.pt"
    (bad / "notes").mkdir()
    (bad / "notes" / "readme.txt").write_text("not a run")
    paths["notes"] = bad / "notes"
    return paths


_OUTS = itertools.count()


def _fresh(made: dict[str, Path]) -> str:
    """An output path no case may create (checked after the cases: nothing is written before the checks)."""
    return str(made["fresh"] / f"out{next(_OUTS)}")


def _file_cases(args, option: str, files: dict[str, Path], prefix: str = "", suffix: str = ".npz") -> list[BadInput]:
    """`args(path)` with each bad file of `bad_files` (names `{prefix}{kind}{suffix}`) given to `option`."""
    return [BadInput(kind, args(files[f"{prefix}{name}{suffix}"]), [option, f"{name}{suffix}"])
            for name, kind in FILE_KINDS.items()]  # fmt: skip


def _run_file_cases(command: list[str], made: dict[str, Path], run: Path, weights: str) -> list[BadInput]:
    """`command --run FOLDER` with copies of `run` whose run.json or `weights` (a path inside it) is missing, empty,
    corrupt, a pickle or holds something else."""
    root = made["root"] / "runs" / run.name
    garbage, truncated = made["garbage.pt"].read_bytes(), made["truncated.pt"].read_bytes()
    edits = [("missing_file", "run.json", None), ("empty_file", "run.json", b""), ("corrupt_file", "run.json", garbage),
             ("wrong_content", "run.json", b"[1, 2]"), ("missing_file", weights, None), ("empty_file", weights, b""),
             ("corrupt_file", weights, garbage), ("corrupt_file", weights, truncated),
             ("pickle", weights, made["pickle.pt"].read_bytes()),
             ("wrong_content", weights, made["other.pt"].read_bytes())]  # fmt: skip
    cases = [BadInput("missing_file", [*command, "--run", str(made["root"] / "nothing")], ["--run", "run.json"])]
    for i, (kind, file, content) in enumerate(edits):
        folder = _edited_run(run, root / f"{i}", file, content)
        cases.append(BadInput(kind, [*command, "--run", str(folder)], ["--run", Path(file).name]))
    return cases


def _record_cases(command: list[str], made: dict[str, Path], run: Path, records: list) -> list[BadInput]:
    """`command --run FOLDER` with copies of `run` whose run.json holds each of `records` (kind, name, content)."""
    root = made["root"] / "records" / run.name
    return [BadInput(kind, [*command, "--run", str(_edited_run(run, root / name, "run.json", content))],
                     ["--run", "run.json"]) for kind, name, content in records]  # fmt: skip


def _options(args, options: list[tuple[str, str, str]]) -> list[BadInput]:
    """`args()` plus one bad option each: (kind, option, value), the error naming the option."""
    return [BadInput(kind, [*args(), option, value], [option]) for kind, option, value in options]


def collect_cases(made) -> list[BadInput]:
    def args() -> list[str]:
        return ["collect", "--transitions", "16", "--out", _fresh(made) + ".npz"]

    return [
        BadInput("choice", [*args(), "--env", "NoSuchEnv-v9"], ["--env", "NoSuchEnv-v9"]),
        *_options(args, [("choice", "--quality", "great"), ("range", "--transitions", "0"),
                         ("range", "--transitions", "-5"), ("range", "--seed", "-1"), ("type", "--transitions", "many"),
                         ("type", "--seed", "zero")]),
    ]  # fmt: skip


def train_cases(made) -> list[BadInput]:
    def args(dataset: Path | None = None, out: str | Path | None = None) -> list[str]:
        return ["train", "--dataset", str(dataset or made["pendulum.npz"]), "--method", "td", "--steps", "1",
                "--batch-size", "8", "--out", str(out or _fresh(made))]  # fmt: skip

    cases = _file_cases(args, "--dataset", made) + _file_cases(args, "--dataset", made, "h_", ".hdf5")
    cases += [BadInput(kind, args(made[name]), ["--dataset", name])
              for kind, name in (("wrong_content", "fields.npz"), ("wrong_content", "array.npz"), ("nan", "nan.npz"),
                                 ("shape", "rewards2d.npz"), ("shape", "xor.npz"), ("wrong_content", "h_fields.hdf5"),
                                 ("shape", "h_ragged.hdf5"), ("nan", "h_nan.hdf5"), ("wrong_content", "data.csv"),
                                 ("shape", "m_ragged"), ("wrong_content", "m_fields"), ("nan", "m_nan"),
                                 ("missing_file", "m_nodata"))]  # fmt: skip
    cases += [BadInput("shape", args(made["obs4.npz"]), ["--dataset"]),
              BadInput("shape", [*args(), "--env", "chain"], ["--dataset"]),
              BadInput("range", [*args(), "--env", "chain", "--online-steps", "2"], ["--online-steps"]),
              BadInput("choice", [*args(), "--env", "NoSuchEnv-v9"], ["--env", "NoSuchEnv-v9"]),
              BadInput("mixing", [*args(out=made["run"]), "--method", "iqn"], ["--out", "another run"]),
              BadInput("mixing", args(out=made["run"]), ["--out", "--resume"]),
              BadInput("mixing", args(out=made["notes"]), ["--out", "notes"])]  # fmt: skip
    return cases + _options(
        args,
        [("type", "--steps", "one"), ("type", "--batch-size", "x"), ("type", "--gamma", "high"),
         ("type", "--n-envs", "two"), ("range", "--steps", "0"), ("range", "--batch-size", "0"),
         ("range", "--gamma", "1"), ("range", "--gamma", "-0.5"), ("range", "--online-steps", "-1"),
         ("range", "--n-envs", "0"), ("range", "--seed", "-1"), ("nan", "--gamma", "nan"),
         ("choice", "--method", "sac"), ("choice", "--policy-extraction", "best"), ("choice", "--device", "tpu")],
    )  # fmt: skip


def evaluate_cases(made) -> list[BadInput]:
    command, run = ["evaluate", "--episodes", "1"], made["run"]
    cases = _run_file_cases(command, made, run, str(next(run.glob("step-*/weights.pt")).relative_to(run)))
    cases += _record_cases(command, made, run, [
        ("wrong_content", "marl", (made["mrun"] / "run.json").read_bytes()),
        ("wrong_content", "env", _record(run, env="NoSuchEnv-v9")),
        ("shape", "spaces", _record(run, spaces={"obs_dim": 5})),
        ("nan", "gamma", _record(run, agent={"gamma": float("nan")})),
    ])  # fmt: skip
    return cases + _options(
        lambda: ["evaluate", "--run", str(run)],
        [("range", "--episodes", "0"), ("range", "--seed", "-1"), ("type", "--episodes", "many"),
         ("type", "--seed", "x"), ("choice", "--out", _fresh(made) + ".txt"), ("type", "--out", str(made["notes"]))],
    )  # fmt: skip


def marl_collect_cases(made) -> list[BadInput]:
    def args() -> list[str]:
        return ["marl-collect", "--transitions", "16", "--out", _fresh(made) + ".npz"]

    return [
        BadInput("choice", [*args(), "--env", "chess"], ["--env", "chess"]),
        *_options(args, [("choice", "--quality", "great"), ("range", "--transitions", "0"), ("range", "--agents", "1"),
                         ("range", "--agents", "0"), ("range", "--seed", "-1"), ("type", "--transitions", "many"),
                         ("type", "--agents", "two")]),
    ]  # fmt: skip


def marl_train_cases(made) -> list[BadInput]:
    def args(dataset: Path | None = None, out: str | Path | None = None) -> list[str]:
        return ["marl-train", "--dataset", str(dataset or made["xor.npz"]), "--env", "xor", "--hidden", "8",
                "--steps", "1", "--batch-size", "8", "--out", str(out or _fresh(made))]  # fmt: skip

    cases = _file_cases(args, "--dataset", made, prefix="x_")
    cases += [BadInput(kind, args(made[name]), ["--dataset", name])
              for kind, name in (("wrong_content", "fields.npz"), ("wrong_content", "array.npz"),
                                 ("nan", "x_nan.npz"), ("shape", "pendulum.npz"))]  # fmt: skip
    cases += [BadInput("shape", [*args(), "--env", "spread"], ["--dataset", "xor.npz"]),
              BadInput("shape", args(made["x_agents3.npz"]), ["--dataset", "x_agents3.npz"]),
              BadInput("choice", [*args(), "--env", "chess"], ["--env", "chess"]),
              BadInput("mixing", [*args(out=made["mrun"]), "--hidden", "16"], ["--out", "another run"]),
              BadInput("mixing", args(out=made["mrun"]), ["--out", "--resume"]),
              BadInput("mixing", [*args(out=made["mrun"]), "--resume", "--overwrite"], ["--out", "not both"]),
              BadInput("mixing", args(made["root"] / "xor_1.npz", made["mrun"]), ["--out", "another run"]),
              BadInput("mixing", args(out=made["notes"]), ["--out", "notes"])]  # fmt: skip
    return cases + _options(
        args,
        [("type", "--steps", "one"), ("type", "--lr", "fast"), ("type", "--gamma", "high"),
         ("type", "--hidden", "wide"), ("range", "--steps", "0"), ("range", "--batch-size", "0"),
         ("range", "--gamma", "1.5"), ("range", "--lr", "0"), ("range", "--alpha", "-1"), ("range", "--hidden", "0"),
         ("range", "--hidden", "8,-1"), ("range", "--seed", "-1"), ("nan", "--lr", "nan"), ("nan", "--gamma", "nan"),
         ("nan", "--alpha", "inf"), ("choice", "--method", "sac"), ("choice", "--mixer", "max"),
         ("choice", "--bc-flow", "both"), ("choice", "--device", "tpu")],
    )  # fmt: skip


def marl_evaluate_cases(made) -> list[BadInput]:
    command, run = ["marl-evaluate", "--episodes", "2", "--latency-repeats", "0"], made["mrun"]
    cases = _run_file_cases(command, made, run, str(next(run.glob("policy/step-*/weights.pt")).relative_to(run)))
    cases += _record_cases(command, made, run, [
        ("wrong_content", "value_flows", (made["run"] / "run.json").read_bytes()),
        ("wrong_content", "env", _record(run, env="chess")),
        ("shape", "dims", _record(run, dims={"n_agents": 3})),
        ("nan", "gamma", _record(run, learner={"gamma": float("nan")})),
    ])  # fmt: skip
    return cases + _options(
        lambda: ["marl-evaluate", "--run", str(run)],
        [("range", "--episodes", "0"), ("range", "--latency-repeats", "-1"), ("range", "--seed", "-1"),
         ("type", "--episodes", "many"), ("type", "--latency-repeats", "x"),
         ("choice", "--out", _fresh(made) + ".txt"), ("type", "--out", str(made["notes"]))],
    )  # fmt: skip


@pytest.fixture(scope="module")
def cases(made) -> dict[str, list[BadInput]]:
    """The cases of each method's commands, built once (their run folders are copies made here)."""
    commands = {"value_flows": (collect_cases, train_cases, evaluate_cases),
                "mac_flow": (marl_collect_cases, marl_train_cases, marl_evaluate_cases)}  # fmt: skip
    return {method: [case for build in builds for case in build(made)] for method, builds in commands.items()}


@pytest.mark.parametrize("method", ["value_flows", "mac_flow"])
def test_bad_inputs_fail_cleanly_before_any_work(made, cases, method):
    check_bad_inputs(app, cases[method], pickle_marker=made["marker"])
    assert not made["x_marker"].exists() and not made["h_marker"].exists(), "a pickle's code ran"
    assert not made["fresh"].exists(), "a refused command wrote its output"


def test_every_command_has_its_bad_inputs(cases):
    kinds = {"train": ["mixing", "nan", "shape", "pickle"], "marl-train": ["mixing", "nan", "shape", "pickle"],
             "evaluate": ["pickle", "shape", "nan"], "marl-evaluate": ["pickle", "shape", "nan"]}  # fmt: skip
    assert uncovered_commands(app, [*cases["value_flows"], *cases["mac_flow"]], kinds) == []
