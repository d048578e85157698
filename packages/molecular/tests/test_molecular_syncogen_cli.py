"""`flowlab molecular syncogen build-space|train|generate|evaluate`: a toy round trip (SDF with the route written and
read back), every command refusing bad input with one error line and exit 2, and training resumed from a checkpoint
equal to an uninterrupted run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from rdkit import Chem
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.molecular.cli import app
from flowlab.molecular.syncogen import cli as syncogen_cli
from flowlab.molecular.syncogen.train import TrainConfig, train_variant

TOY = ["--n-molecules", "40", "--steps", "3", "--batch-size", "4", "--dim", "8", "--layers", "1"]


@pytest.fixture(scope="module")
def toy_run(syncogen_tiny, syncogen_vocab_dir, tmp_path_factory):
    """A syncogen run trained for 3 steps on the 40-molecule space (the tiny space's cache)."""
    _, _, cache = syncogen_tiny
    run = tmp_path_factory.mktemp("runs") / "toy"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWLAB_CACHE", str(cache))
        mp.setenv("FLOWLAB_DATA", str(syncogen_vocab_dir.parent))
        res = CliRunner().invoke(app, ["syncogen", "train", "--out", str(run), *TOY])
        assert res.exit_code == 0, res.output
        yield run


def _invoke(args, cache, data):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWLAB_CACHE", str(cache))
        mp.setenv("FLOWLAB_DATA", str(data))
        return CliRunner().invoke(app, args)


def test_round_trip_generate_sdf_and_evaluate(toy_run, syncogen_tiny, syncogen_vocab_dir, tmp_path):
    _, _, cache = syncogen_tiny
    res = _invoke(
        ["syncogen", "build-space", "--n-molecules", "40", "--workers", "1"], cache, syncogen_vocab_dir.parent
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["molecules"] == 40 and not json.loads(res.output)["built"]  # cached
    sdf = tmp_path / "out.sdf"
    res = _invoke(["syncogen", "generate", str(toy_run), "-n", "12", "--steps", "3", "--out", str(sdf)], cache,
                  syncogen_vocab_dir.parent)  # fmt: skip
    assert res.exit_code == 0, res.output
    counts = json.loads(res.output)
    mols = [m for m in Chem.SDMolSupplier(str(sdf)) if m is not None]
    assert len(mols) == counts["valid"] > 0
    assert all(m.HasProp("route") and m.HasProp("building_blocks") and m.GetNumConformers() == 1 for m in mols)
    assert all("reaction" in m.GetProp("route") for m in mols if " | " in m.GetProp("building_blocks"))
    res = _invoke(["syncogen", "evaluate", str(toy_run), "-n", "6", "--steps", "3", "--etkdg"], cache,
                  syncogen_vocab_dir.parent)  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.strip().splitlines()]
    assert [r["row"] for r in rows] == ["syncogen", "graph_etkdg"]
    assert all(0 <= r["validity"] <= 1 and 0 <= r["synthesizability"] <= 1 for r in rows)


def _bad_vocab(tmp_path: Path, source: Path, which: str) -> str:
    folder = tmp_path / f"vocab_{which}"
    shutil.copytree(source, folder)
    file = folder / ("building_blocks.json" if which == "smiles" else "reactions.json")
    data = json.loads(file.read_text())
    data = {("C1CC(" if which == "smiles" else "[c:1-[Br]>>C") if i == 2 else k: v for i, (k, v) in
            enumerate(data.items())}  # fmt: skip
    file.write_text(json.dumps(data))
    return str(folder)


def test_every_command_refuses_bad_input(toy_run, syncogen_tiny, syncogen_vocab_dir, tmp_path):
    _, _, cache = syncogen_tiny
    files = bad_files(tmp_path / "files", ".pt", like=toy_run / "model.pt")
    runs = {}
    for kind in ("missing", "empty", "garbage", "pickle", "truncated"):
        runs[kind] = tmp_path / f"run_{kind}"
        shutil.copytree(toy_run, runs[kind], ignore=shutil.ignore_patterns("ckpt"))
        (runs[kind] / "model.pt").unlink()
        if kind != "missing":
            shutil.copy(files[kind], runs[kind] / "model.pt")
    wrong = tmp_path / "run_wrong"
    shutil.copytree(toy_run, wrong, ignore=shutil.ignore_patterns("ckpt"))
    (wrong / "config.json").write_text(json.dumps({"method": "wt_asbs"}))
    smiles, smarts = _bad_vocab(tmp_path, syncogen_vocab_dir, "smiles"), _bad_vocab(tmp_path, syncogen_vocab_dir, "")
    out = str(tmp_path / "o.sdf")
    build = ["syncogen", "build-space"]
    cases = [
        BadInput("range", [*build, "--n-molecules", "0"], ["--n-molecules"]),
        BadInput("range", [*build, "--max-blocks", "9"], ["--max-blocks"]),
        BadInput("type", [*build, "--conformers", "two"], ["--conformers"]),
        BadInput("wrong_content", [*build, "--vocabulary", smiles], ["--vocabulary", "entry 2"]),
        BadInput("wrong_content", [*build, "--vocabulary", smarts], ["--vocabulary", "entry 2"]),
        BadInput("missing_file", [*build, "--vocabulary", str(tmp_path / "none")], ["--vocabulary"]),
        BadInput("range", [*build, "--workers", "0"], ["--workers"]),
    ]
    tr = ["syncogen", "train", "--out", str(tmp_path / "t")]
    cases += [
        BadInput("choice", [*tr, "--variant", "nope"], ["--variant"]),
        BadInput("range", [*tr, "--steps", "0"], ["--steps"]),
        BadInput("range", [*tr, "--lr", "-1"], ["--lr"]),
        BadInput("nan", [*tr, "--lr", "nan"], ["--lr"]),
        BadInput("type", [*tr, "--batch-size", "x"], ["--batch-size"]),
        BadInput("choice", [*tr, "--device", "tpu"], ["--device"]),
        BadInput("wrong_content", [*tr, "--vocabulary", smiles], ["--vocabulary"]),
        BadInput("mixing", ["syncogen", "train", "--out", str(toy_run), *TOY, "--seed", "5"], ["--out"]),
    ]
    gen = ["syncogen", "generate"]
    cases += [
        BadInput("missing_file", [*gen, str(runs["missing"]), "--out", out], ["RUN"]),
        BadInput("empty_file", [*gen, str(runs["empty"]), "--out", out], ["RUN"]),
        BadInput("corrupt_file", [*gen, str(runs["garbage"]), "--out", out], ["RUN"]),
        BadInput("corrupt_file", [*gen, str(runs["truncated"]), "--out", out], ["RUN"]),
        BadInput("pickle", [*gen, str(runs["pickle"]), "--out", out], ["RUN"]),
        BadInput("wrong_content", [*gen, str(wrong), "--out", out], ["RUN"]),
        BadInput("range", [*gen, str(toy_run), "--out", out, "-n", "0"], ["--n"]),
        BadInput("choice", [*gen, str(toy_run), "--out", str(tmp_path / "o.xyz")], ["--out"]),
    ]
    ev = ["syncogen", "evaluate"]
    cases += [
        BadInput("missing_file", [*ev, str(runs["missing"])], ["RUN"]),
        BadInput("empty_file", [*ev, str(runs["empty"])], ["RUN"]),
        BadInput("pickle", [*ev, str(runs["pickle"])], ["RUN"]),
        BadInput("wrong_content", [*ev, str(wrong)], ["RUN"]),
        BadInput("range", [*ev, str(toy_run), "--steps", "0"], ["--steps"]),
        BadInput("range", [*ev, str(toy_run), "--xtb", "-1"], ["--xtb"]),
        BadInput("choice", [*ev, str(toy_run), "--device", "nope"], ["--device"]),
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLOWLAB_CACHE", str(cache))
        mp.setenv("FLOWLAB_DATA", str(syncogen_vocab_dir.parent))
        check_bad_inputs(app, cases, pickle_marker=tmp_path / "files" / "PICKLE_RAN")
    assert uncovered_commands(syncogen_cli.app, [BadInput(c.kind, c.args[1:], c.names) for c in cases]) == []
    assert not (tmp_path / "o.sdf").exists() and not (tmp_path / "t" / "model.pt").exists()


def test_resumed_training_equals_uninterrupted(syncogen_tiny, tmp_path):
    vocab, space, _ = syncogen_tiny
    config = TrainConfig(steps=4, batch_size=4, dim=8, layers=1, warmup=2)
    whole = train_variant("syncogen", vocab, space, config, ckpt_dir=tmp_path / "a")
    train_variant("syncogen", vocab, space, TrainConfig(**{**config.to_dict(), "steps": 2}), ckpt_dir=tmp_path / "b")
    resumed = train_variant("syncogen", vocab, space, config, ckpt_dir=tmp_path / "b", resume=True)
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
