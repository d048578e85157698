"""`flowlab crowd train|simulate|predict|evaluate|render|export` meet every kind of bad input
(`flowlab.core.testing.bad_input`): one error naming the option or file, exit 2, before any work. The options,
checkpoints, rollouts and data roots of bad files need no data (a model checkpoint is built on the synthetic scene);
the cases that need the crowds data set (a run folder of another run, a spoilt copy of a scene, a rollout that does
not fit its window, predicted frames outside the window) skip without it."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.crowd_sim.cli import app

ROOT = Path(os.environ.get("FLOWLAB_DATA", "/nonexistent"))
needs_data = pytest.mark.skipif(not (ROOT / "crowds").is_dir(), reason=f"crowds data set not found under {ROOT}")
GC_TEST = "time2344-2404"


@pytest.fixture
def checkpoint(tmp_path, scene_factory) -> Path:
    """An untrained quick model of the synthetic scene, saved as `flowlab crowd train` saves one."""
    from flowlab.crowd_sim.envsocial_diff.model import SIZES
    from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_config

    return EnvSocialDiff(scene_config(SIZES["quick"], "full", scene_factory())).save(tmp_path / "model.pt")


def _rollout(folder: Path, name: str, **changes) -> str:
    """A rollout file of 3 pedestrians over 5 frames of the GC test window, with `changes` (None removes a key)."""
    blob = {"positions": torch.zeros(1, 5, 3, 2), "mask": torch.ones(5, 3, dtype=torch.bool), "start": 0,
            "window": GC_TEST, "scene": "gc"} | changes  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({k: v for k, v in blob.items() if v is not None}, folder / name)
    return str(folder / name)


def _data_roots(folder: Path) -> list[tuple[str, str, str]]:
    """(kind, data root, file named) of roots whose scene_constants.json is missing or spoilt (no data needed)."""
    garbage = bytes(range(256)) * 4
    spoilt = {"empty_file": b"", "corrupt_file": garbage, "wrong_content": b"[1, 2]"}
    roots = [("missing_file", str(folder / "nowhere"), "nowhere")]
    for kind, content in spoilt.items():
        (folder / kind / "crowds").mkdir(parents=True)
        (folder / kind / "crowds" / "scene_constants.json").write_bytes(content)
        roots.append((kind, str(folder / kind), "scene_constants.json"))
    (folder / "truncated" / "crowds").mkdir(parents=True)
    (folder / "truncated" / "crowds" / "scene_constants.json").write_text('{"time_unit_s": 0.08, "gc": {"env')
    (folder / "other" / "crowds").mkdir(parents=True)
    (folder / "other" / "crowds" / "scene_constants.json").write_text('{"time_unit_s": 0.08}')
    return [*roots, ("corrupt_file", str(folder / "truncated"), "scene_constants.json"),
            ("wrong_content", str(folder / "other"), "scene_constants.json")]  # fmt: skip


def _train_cases(folder: Path, roots) -> list[BadInput]:
    def case(kind, names, *args):
        return BadInput(kind, ["train", "--epochs", "1", "--out", str(folder / "m.pt"), *args], names)

    cases = [case("choice", ["--scene"], "--scene", "mall"), case("choice", ["--ablation"], "--ablation", "none"),
             case("choice", ["--size"], "--size", "huge"), case("choice", ["--frame"], "--frame", "tilted"),
             case("choice", ["--device"], "--device", "tpu"), case("type", ["--epochs"], "--epochs", "two"),
             case("type", ["--finetune-steps"], "--finetune-steps", "1.5"),
             case("type", ["--frame-stride"], "--frame-stride", "x"), case("type", ["--inits"], "--inits", "x"),
             case("type", ["--seed"], "--seed", "x"), case("range", ["--seed"], "--seed", str(2**65)),
             case("range", ["--epochs"], "--epochs", "-1"),
             case("range", ["--epochs"], "--epochs", "0"),
             case("range", ["--finetune-steps"], "--finetune-steps", "-2"),
             case("range", ["--frame-stride"], "--frame-stride", "0"), case("range", ["--inits"], "--inits", "0"),
             case("range", ["--inits"], "--inits", "2", "--ckpt-dir", str(folder / "ckpt"))]  # fmt: skip
    return cases + [case(kind, ["--data", name], "--data", root) for kind, root, name in roots]


def _bad_files(folder: Path) -> list[tuple[str, str]]:
    """(kind, path) of the missing, empty, garbage, truncated (a checkpoint's first half) and pickle files."""
    names = [("missing_file", "missing"), ("empty_file", "empty"), ("corrupt_file", "garbage"),
             ("corrupt_file", "truncated"), ("pickle", "pickle")]  # fmt: skip
    return [(kind, str(folder / f"{name}.pt")) for kind, name in names]


def _checkpoints(checkpoint: Path, folder: Path, bad) -> list[tuple[str, str, list[str]]]:
    """(kind, checkpoint file, names) of the bad files and of spoilt copies of `checkpoint`."""
    blob = torch.load(checkpoint, weights_only=True)
    state = blob["state_dict"]
    first = next(iter(state))
    spoilt = {"rollout": ("wrong_content", {"positions": torch.zeros(1, 2, 3, 2)}),
              "format": ("wrong_content", {**blob, "format": "another/1"}),
              "config": ("wrong_content", {**blob, "config": {**blob["config"], "depth": 3}}),
              "force": ("wrong_content", {**blob, "destination_force": {"v_des": -1.0, "tau": 0.5}}),
              "keys": ("wrong_content", {**blob, "state_dict": {"weight": state[first]}}),
              "noconfig": ("wrong_content", {k: v for k, v in blob.items() if k != "config"}),
              "shape": ("shape", {**blob, "state_dict": {**state, first: state[first][..., :1]}}),
              "nan": ("nan", {**blob, "state_dict": {k: torch.full_like(v, math.nan) for k, v in state.items()}}),
              "scale": ("nan", {**blob, "scale": math.nan})}  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    for name, (_, content) in spoilt.items():
        torch.save(content, folder / f"{name}.pt")
    files = [*bad, *((kind, str(folder / f"{name}.pt")) for name, (kind, _) in spoilt.items())]
    return [(kind, path, [Path(path).name]) for kind, path in files]


def _policy_cases(command: list[str], checkpoint: Path, checkpoints, roots) -> list[BadInput]:
    """The cases of the options `simulate` and `predict` share; `command`: the command, its small size and --out."""

    def case(kind, names, *args, policy=("--baseline", "cv")):
        return BadInput(kind, [*command, "--scene", "gc", *policy, *args], names)

    model = ("--checkpoint", str(checkpoint))
    cases = [case("choice", ["--scene"], "--scene", "mall"), case("choice", ["--baseline"], policy=("--baseline", "x")),
             case("choice", ["--checkpoint"], policy=()), case("choice", ["--checkpoint"], *model),
             case("choice", ["--window"], "--window", "time9999"), case("choice", ["--frame"], "--frame", "tilted"),
             case("choice", ["--sampler"], "--sampler", "euler"), case("choice", ["--device"], "--device", "tpu"),
             case("type", ["--sample-steps"], "--sample-steps", "x", policy=model),
             case("type", ["--seed"], "--seed", "x"), case("range", ["--seed"], "--seed", str(-(2**64))),
             case("range", ["--sample-steps"], "--sample-steps", "0", "--sampler", "ddim", policy=model),
             case("range", ["--sample-steps"], "--sample-steps", "500", "--sampler", "ddim", policy=model)]  # fmt: skip
    cases += [case(kind, ["--checkpoint", *names], policy=("--checkpoint", path)) for kind, path, names in checkpoints]
    return cases + [case(kind, ["--data", name], "--data", root) for kind, root, name in roots]


def _simulate_cases(checkpoint: Path, checkpoints, folder: Path, roots) -> list[BadInput]:
    command = ["simulate", "--steps", "1", "--out", str(folder / "r.pt")]
    cases = [BadInput("type", [*command, "--steps", "x"], ["--steps"]),
             BadInput("type", [*command, "--replicas", "1.5"], ["--replicas"]),
             BadInput("range", [*command, "--steps", "0"], ["--steps"]),
             BadInput("range", [*command, "--replicas", "0"], ["--replicas"])]  # fmt: skip
    return cases + _policy_cases(command, checkpoint, checkpoints, roots)


def _predict_cases(checkpoint: Path, checkpoints, folder: Path, roots) -> list[BadInput]:
    command = ["predict", "--horizon", "1", "--samples", "1", "--out", str(folder / "p.pt")]
    cases = [BadInput("type", [*command, "--start", "x"], ["--start"]),
             BadInput("type", [*command, "--observe", "1.5"], ["--observe"]),
             BadInput("type", [*command, "--horizon", "x"], ["--horizon"]),
             BadInput("type", [*command, "--samples", "x"], ["--samples"]),
             BadInput("type", [*command, "--known-destinations=yes"], ["--known-destinations"]),
             BadInput("range", [*command, "--start", "-1"], ["--start"]),
             BadInput("range", [*command, "--observe", "1"], ["--observe"]),
             BadInput("range", [*command, "--horizon", "0"], ["--horizon"]),
             BadInput("range", [*command, "--samples", "0"], ["--samples"])]  # fmt: skip
    return cases + _policy_cases(command, checkpoint, checkpoints, roots)


def _rollouts(folder: Path, bad) -> list[tuple[str, str, list[str]]]:
    """(kind, rollout file, names) of the bad files and of malformed rollouts."""
    torch.save(torch.zeros(3), folder / "tensor.pt")
    spoilt = [("wrong_content", "nomask", {"mask": None}, "mask"),
              ("wrong_content", "scene", {"scene": "mall"}, "scene"),
              ("wrong_content", "window", {"window": "time9999"}, "window"),
              ("type", "start", {"start": "zero"}, "start"), ("range", "negative", {"start": -1}, "start"),
              ("type", "maskfloat", {"mask": torch.ones(5, 3)}, "mask"),
              ("nan", "nan", {"positions": torch.full((1, 5, 3, 2), math.nan)}, "positions"),
              ("shape", "flat", {"positions": torch.zeros(5, 3, 2)}, "positions"),
              ("shape", "xyz", {"positions": torch.zeros(1, 5, 3, 3)}, "positions"),
              ("shape", "mask", {"mask": torch.ones(4, 3, dtype=torch.bool)}, "mask"),
              ("shape", "norollout", {"positions": torch.zeros(0, 5, 3, 2)}, "positions")]  # fmt: skip
    files = [(kind, path, [Path(path).name]) for kind, path in bad]
    files += [("wrong_content", str(folder / "tensor.pt"), ["tensor.pt"])]
    files += [(kind, _rollout(folder, f"{name}.pt", **change), [f"{name}.pt", key])
              for kind, name, change, key in spoilt]  # fmt: skip
    return [(kind, path, ["ROLLOUT", *names]) for kind, path, names in files]


def _read_cases(folder: Path, roots, bad) -> list[BadInput]:
    """The cases of `evaluate`, `render` and `export`: bad rollouts, frames, data roots and outputs."""
    good = _rollout(folder, "good.pt")
    (folder / "notes.txt").write_text("not a folder")
    (folder / "folder.txt").mkdir()
    rollouts = _rollouts(folder, bad)
    cases = []
    for command in ("evaluate", "render", "export"):
        cases += [BadInput(kind, [command, path], names) for kind, path, names in rollouts]
        cases += [BadInput("choice", [command, good, "--frame", "tilted"], ["--frame"])]
        cases += [BadInput(kind, [command, good, "--data", root], ["--data", name]) for kind, root, name in roots]
    return [*cases, BadInput("choice", ["render", good, "--out", str(folder / "notes.txt")], ["--out"]),
            BadInput("type", ["render", good, "--every", "x"], ["--every"]),
            BadInput("range", ["render", good, "--every", "0"], ["--every"]),
            BadInput("choice", ["export", good, "--out", str(folder / "r.csv")], ["--out"]),
            BadInput("choice", ["export", good, "--out", str(folder / "folder.txt")], ["--out"]),
            BadInput("type", ["export", good, "--replica", "x"], ["--replica"]),
            BadInput("range", ["export", good, "--replica", "-1"], ["--replica"]),
            BadInput("range", ["export", good, "--replica", "1"], ["--replica"])]  # fmt: skip


def test_every_command_refuses_bad_input_cleanly(checkpoint, tmp_path):
    roots = _data_roots(tmp_path / "roots")
    bad_files(tmp_path / "bad", ".pt", like=checkpoint)
    bad = _bad_files(tmp_path / "bad")
    checkpoints = _checkpoints(checkpoint, tmp_path / "checkpoints", bad)
    cases = _train_cases(tmp_path / "train", roots) + _read_cases(tmp_path / "read", roots, bad)
    cases += _simulate_cases(checkpoint, checkpoints, tmp_path / "simulate", roots)
    cases += _predict_cases(checkpoint, checkpoints, tmp_path / "predict", roots)
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "bad" / "PICKLE_RAN")
    assert uncovered_commands(app, cases) == []
    written = [tmp_path / "train" / "m.pt", tmp_path / "simulate" / "r.pt", tmp_path / "predict" / "p.pt"]
    assert not any(path.exists() for path in written)


def _spoilt_copy(folder: Path, file: str, content: bytes) -> str:
    """A data root whose crowds/ mirrors the data set (folders made here, files linked) but for `file` (relative to
    crowds/), which holds `content`; the data set itself is never written."""
    source = ROOT / "crowds"
    (folder / "crowds").mkdir(parents=True)
    for path in sorted(source.rglob("*")):
        target = folder / "crowds" / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.relative_to(source) != Path(file):
            target.symlink_to(path)
    (folder / "crowds" / file).write_bytes(content)
    return str(folder)


def _train(ckpt_dir: Path, out: Path) -> list[str]:
    return ["train", "--scene", "ucy_students03", "--ablation", "no_env", "--epochs", "1", "--frame-stride", "20",
            "--ckpt-dir", str(ckpt_dir), "--out", str(out)]  # fmt: skip


def _predicted_frames_cases(out: Path) -> list[BadInput]:
    """`predict` with observed or predicted frames outside the GC test window (750 frames, nobody in 700 of them)."""
    command = ["predict", "--scene", "gc", "--baseline", "cv", "--samples", "1", "--out", str(out)]
    return [
        BadInput("range", [*command, "--start", "3"], ["--start"]),
        BadInput("range", [*command, "--start", "745"], ["--start"]),
        BadInput("range", [*command, "--horizon", "1000"], ["--observe", "--horizon"]),
        BadInput("range", [*command, "--observe", "700", "--horizon", "1"], ["--start", "no pedestrian"]),
    ]


@needs_data
def test_bad_data_and_mixed_runs_are_refused(tmp_path):
    test = "ucy_students03/time162-216"
    window = (ROOT / "crowds" / f"{test}.csv").read_bytes()
    header, _, rows = window.partition(b"\n")
    first, _, others = rows.partition(b"\n")
    cut = window.index(b",", window.index(b"\n", len(window) // 2)) + 1  # inside a row: a row of one field
    nan_row = first.rsplit(b",", 1)[0] + b",nan"
    spoilt = [("corrupt_file", f"{test}.csv", window[:cut]), ("wrong_content", f"{test}.csv", b"a,b,c\n" + rows),
              ("nan", f"{test}.csv", b"\n".join([header, nan_row, others])), ("corrupt_file", f"{test}.json", b"{"),
              ("corrupt_file", "gc/scene/bg.jpg", bytes(range(256)) * 4)]  # fmt: skip
    cases = []
    for i, (kind, file, content) in enumerate(spoilt):
        root = _spoilt_copy(tmp_path / f"root{i}", file, content)
        args = ["simulate", "--scene", file.split("/")[0], "--baseline", "cv", "--steps", "1", "--out",
                str(tmp_path / "r.pt"), "--data", root]  # fmt: skip
        cases.append(BadInput(kind, args, ["--data", Path(file).name]))
    late = _rollout(tmp_path, "late.pt", start=10_000)
    cases += [BadInput("shape", ["evaluate", _rollout(tmp_path, "few.pt")], ["ROLLOUT", "few.pt", "pedestrians"])]
    cases += [BadInput("range", [command, late], ["ROLLOUT", "late.pt", "frames"])
              for command in ("evaluate", "render", "export")]  # fmt: skip
    cases += _predicted_frames_cases(tmp_path / "p.pt")
    other = tmp_path / "other"
    (other / "checkpoints").mkdir(parents=True)
    (other / "run.json").write_text('{"command": "crowd train", "scene": "gc"}')
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("not a run")
    cases += [
        BadInput("mixing", _train(folder, tmp_path / "m.pt"), ["--ckpt-dir"])
        for folder in (other, tmp_path / "foreign")
    ]
    check_bad_inputs(app, cases)
    assert not any((tmp_path / name).exists() for name in ("r.pt", "m.pt", "p.pt"))
