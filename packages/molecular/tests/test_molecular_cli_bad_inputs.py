"""`flowlab molecular sample|metad|evaluate|export` meet every kind of bad input (`flowlab.core.testing.bad_input`): one
error naming the option or file, exit 2, before any work. The runs evaluated are a tiny toy run and a metadynamics
run written here; the alanine dipeptide cases use a data root of bad files (OpenMM reads them), plus, where the
data set is present, a truncated and a swapped copy of its files."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from flowlab.core.testing import BadInput, bad_files, check_bad_inputs, uncovered_commands
from flowlab.datasets import root
from flowlab.molecular.cli import app
from flowlab.molecular.wt_asbs.aldp import DATASET, INPCRD, PRMTOP
from flowlab.molecular.wt_asbs.asbs import ASBSConfig
from flowlab.molecular.wt_asbs.benchmarks.toy import TOY
from flowlab.molecular.wt_asbs.trajectories import element_topology

TINY = ASBSConfig(stages="AC", adjoint_epochs=2, corrector_epochs=1, steps_per_epoch=2, sde_steps=10,
                  skip_epochs=0, new_samples=32)  # fmt: skip
PRMTOP_NAME, INPCRD_NAME = Path(PRMTOP).name, Path(INPCRD).name


@pytest.fixture(scope="module")
def tiny_toys():
    """The toys' quick variant at toy size for the whole module (a case accepted by mistake stays quick)."""
    quick = TOY.variants["quick"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(TOY.variants, "quick", replace(quick, sampler=replace(quick.sampler, asbs=TINY)))
        yield


def _evaluates(run: Path) -> None:
    res = CliRunner().invoke(app, ["evaluate", str(run)])
    assert res.exit_code == 0, res.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_toys) -> dict[str, Path]:
    """A toy run written by `sample` and a metadynamics run in `metad`'s format, both evaluated cleanly."""
    folder = tmp_path_factory.mktemp("runs")
    toy = folder / "toy"
    res = CliRunner().invoke(app, ["sample", "--system", "four-well", "--n", "64", "--out", str(toy)])
    assert res.exit_code == 0, res.output
    metad = folder / "metad"
    metad.mkdir()
    config = {"method": "metad", "system": "aldp", "steps": 1000, "seed": 0, "kT": 2.494, "energy_evals": 1000}
    (metad / "config.json").write_text(json.dumps(config))
    torch.save({"cvs": torch.rand(10, 2, dtype=torch.float64) * 6 - 3}, metad / "samples.pt")
    torch.save({"fes": torch.rand(30, 30, dtype=torch.float64)}, metad / "fes.pt")
    for run in (toy, metad):
        _evaluates(run)
    return {"toy": toy, "metad": metad}


def _variant(good: Path, folder: Path, file: str, content: object) -> str:
    """A copy of run `good` at `folder` whose `file` is removed (None), bytes, JSON (config.json) or tensors."""
    shutil.copytree(good, folder)
    target = folder / file
    target.unlink()
    if isinstance(content, bytes):
        target.write_bytes(content)
    elif file.endswith(".json"):
        target.write_text(json.dumps(content))
    elif content is not None:
        torch.save(content, target)
    return str(folder)


def _data_root(folder: Path, prmtop: bytes, inpcrd: bytes) -> str:
    """A data root whose alanine dipeptide files hold the given bytes."""
    for file, data in ((PRMTOP, prmtop), (INPCRD, inpcrd)):
        (folder / DATASET / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / DATASET / file).write_bytes(data)
    return str(folder)


def _aldp_roots(folder: Path) -> list[tuple[str, str, list[str]]]:
    """(kind, data root, names) of bad alanine dipeptide data: missing, empty, garbage or swapped files, plus a
    truncated topology and a swapped coordinate file where the real data set is present."""
    garbage = bytes(range(256)) * 4
    cases = [("missing_file", str(folder / "nowhere"), ["--data-root", "nowhere"]),
             ("empty_file", _data_root(folder / "empty", b"", garbage), [PRMTOP_NAME]),
             ("corrupt_file", _data_root(folder / "garbage", garbage, garbage), [PRMTOP_NAME]),
             ("wrong_content", _data_root(folder / "crd", b"ACE\n  22\n", garbage), [PRMTOP_NAME])]  # fmt: skip
    data = root(required=False)
    if data is not None and (data / DATASET / PRMTOP).is_file():
        top, crd = (data / DATASET / PRMTOP).read_bytes(), (data / DATASET / INPCRD).read_bytes()
        cases += [("corrupt_file", _data_root(folder / "truncated", top[: len(top) // 2], crd), [PRMTOP_NAME]),
                  ("wrong_content", _data_root(folder / "swapped", top, top), [INPCRD_NAME])]  # fmt: skip
    return [(kind, path, ["--data-root", *names]) for kind, path, names in cases]


def _user_files(folder: Path) -> dict[str, str]:
    """A user's own molecule of 5 atoms: a serialised OpenMM System (.xml, no forces), its .pdb, a .pdb of 3 atoms,
    a garbage .xml; and names of files that are missing or of an unknown kind."""
    import openmm
    from openmm import app as omm_app
    from openmm import unit

    folder.mkdir(parents=True, exist_ok=True)
    system = openmm.System()
    for _ in range(5):
        system.addParticle(12.0)
    (folder / "system.xml").write_text(openmm.XmlSerializer.serialize(system))
    (folder / "garbage.xml").write_bytes(bytes(range(256)) * 4)
    for name, n in (("five.pdb", 5), ("three.pdb", 3)):
        pos = [openmm.Vec3(0.15 * i, 0.1 * (i % 2), 0.05 * i) for i in range(n)] * unit.nanometer
        with (folder / name).open("w") as f:
            omm_app.PDBFile.writeFile(element_topology([6] * n, "MOL"), pos, f)
    files = {name: str(folder / name) for name in ("system.xml", "garbage.xml", "five.pdb", "three.pdb")}
    files.update({name: str(folder / name) for name in ("nowhere.xml", "nowhere.pdb", "system.mol2", "pos.gro")})
    return files


def _user_cases(case, files: dict[str, str]) -> list[BadInput]:
    """`sample --system FILE --positions FILE --cv dihedral:i,j,k,l` with each kind of bad option or file."""

    def user(kind, names, *args, system="system.xml", positions="five.pdb", cvs=("dihedral:0,1,2,3",)):
        given = ["--system", files[system]] + (["--positions", files[positions]] if positions else [])
        return case(kind, names, *given, *[a for c in cvs for a in ("--cv", c)], *args)

    return [user("shape", ["--cv", "4 atom indices"], cvs=("dihedral:0,1,2",)),
            user("shape", ["--cv", "one or two"], cvs=("dihedral:0,1,2,3",) * 3),
            user("range", ["--cv", "atom index 9"], cvs=("dihedral:0,1,2,9",)),
            user("type", ["--cv", "integer"], cvs=("dihedral:0,1,2,x",)),
            user("range", ["--cv", "-1"], cvs=("dihedral:0,1,2,-1",)),
            user("range", ["--cv", "repeated"], cvs=("dihedral:0,1,1,2",)),
            user("choice", ["--cv", "dihedral:"], cvs=("angle:0,1,2",)),
            user("missing_file", ["--positions"], positions=None),
            user("missing_file", ["--positions", "nowhere.pdb"], positions="nowhere.pdb"),
            user("wrong_content", ["--positions", "three.pdb", "3 atoms"], positions="three.pdb"),
            user("choice", ["--positions", "pos.gro"], positions="pos.gro"),
            user("choice", ["--system", "system.mol2"], system="system.mol2"),
            user("missing_file", ["--system", "nowhere.xml"], system="nowhere.xml"),
            user("corrupt_file", ["--system", "garbage.xml"], system="garbage.xml"),
            case("choice", ["--cv", "--system FILE"], "--system", "four-well", "--cv", "dihedral:0,1,2,3"),
            case("choice", ["--positions"], "--system", "four-well", "--positions", files["five.pdb"])]  # fmt: skip


def _sample_cases(runs: dict[str, Path], roots) -> list[BadInput]:
    def case(kind, names, *args):
        return BadInput(kind, ["sample", "--out", str(runs["toy"].parent / "new"), *args], names)

    cases = [case("choice", ["--system"], "--system", "argon"), case("choice", ["--bias"], "--bias", "maybe"),
             case("choice", ["--variant"], "--variant", "huge"), case("type", ["--n"], "--n", "many"),
             case("type", ["--seed"], "--seed", "x"), case("range", ["--seed"], "--seed", str(2**65)),
             case("range", ["--n"], "--n", "0"),
             case("range", ["--n"], "--n", "-3"), case("type", ["--steps"], "--steps", "many"),
             case("range", ["--steps"], "--steps", "0"), case("range", ["--steps"], "--steps", "-3"),
             case("range", ["--steps", "3 epochs"], "--steps", "7")]  # fmt: skip
    cases += [case(kind, names, "--system", "aldp", "--data-root", path) for kind, path, names in roots]
    cases += _user_cases(case, _user_files(runs["toy"].parent / "user"))
    toy = ["sample", "--system", "four-well", "--n", "64"]
    foreign = runs["toy"].parent / "foreign"
    foreign.mkdir(exist_ok=True)
    (foreign / "notes.txt").write_text("not a run")
    return [*cases, BadInput("mixing", [*toy, "--seed", "1", "--out", str(runs["toy"])], ["--out"]),
            BadInput("mixing", [*toy, "--out", str(runs["toy"])], ["--out", "--resume"]),
            BadInput("mixing", [*toy, "--out", str(foreign)], ["--out"])]  # fmt: skip


def _metad_cases(runs: dict[str, Path], roots) -> list[BadInput]:
    garbage = _data_root(runs["toy"].parent / "metad_root", b"x", b"x")

    def case(kind, names, *args):
        return BadInput(kind, ["metad", "--steps", "1000", "--out", str(runs["toy"].parent / "new"),
                               "--data-root", garbage, *args], names)  # fmt: skip

    cases = [case("choice", ["--system"], "--system", "four-well"), case("type", ["--steps"], "--steps", "many"),
             case("type", ["--bias-factor"], "--bias-factor", "big"), case("type", ["--height"], "--height", "tall"),
             case("type", ["--seed"], "--seed", "x"), case("range", ["--seed"], "--seed", str(-(2**64))),
             case("range", ["--steps"], "--steps", "0"),
             case("range", ["--steps"], "--steps", "50"), case("range", ["--bias-factor"], "--bias-factor", "1"),
             case("range", ["--bias-factor"], "--bias-factor", "-2"), case("range", ["--height"], "--height", "0"),
             case("range", ["--height"], "--height", "-1"), case("nan", ["--bias-factor"], "--bias-factor", "nan"),
             case("nan", ["--height"], "--height", "nan"), case("nan", ["--height"], "--height", "inf"),
             case("mixing", ["--out"], "--out", str(runs["toy"]))]  # fmt: skip
    return cases + [case(kind, names, "--data-root", path) for kind, path, names in roots]


def _evaluate_cases(runs: dict[str, Path], folder: Path) -> list[BadInput]:
    toy, metad = runs["toy"], runs["metad"]
    samples = torch.load(toy / "samples.pt", weights_only=True)
    fes = torch.load(metad / "fes.pt", weights_only=True)["fes"]
    config = json.loads((toy / "config.json").read_text())
    n = len(samples["cvs"])
    nan = torch.full((n,), math.nan, dtype=torch.float64)
    bad = bad_files(folder / "files", ".pt", like=toy / "samples.pt")
    text = (toy / "config.json").read_bytes()
    count = iter(range(1000))

    def case(kind, good, file, content, names, *args):
        run = _variant(good, folder / f"run{next(count)}", file, content)
        return BadInput(kind, ["evaluate", run, *args], ["RUN", file, *names])

    cases = [BadInput("missing_file", ["evaluate", str(folder / "nowhere")], ["RUN", "nowhere"]),
             BadInput("choice", ["evaluate", str(toy), "--method", "gan"], ["--method"]),
             BadInput("choice", ["evaluate", str(toy), "--weights", "exp"], ["--weights"]),
             BadInput("choice", ["evaluate", str(metad), "--plot", str(folder / "fes.jpg")], ["--plot", "fes.jpg"]),
             BadInput("choice", ["evaluate", str(metad), "--plot", str(folder)], ["--plot"]),
             BadInput("wrong_content", ["evaluate", str(toy), "--plot", str(folder / "fes.png")],
                      ["--plot", "four-well"])]  # fmt: skip
    for file, good in (("config.json", toy), ("samples.pt", toy), ("fes.pt", metad)):
        cases += [case("missing_file", good, file, None, []), case("empty_file", good, file, b"", []),
                  case("corrupt_file", good, file, bad["garbage"].read_bytes(), [])]  # fmt: skip
    for file, good in (("samples.pt", toy), ("fes.pt", metad)):
        cases += [case("pickle", good, file, bad["pickle"].read_bytes(), [])]
    cases += [case("corrupt_file", toy, "samples.pt", bad["truncated"].read_bytes(), []),
              case("corrupt_file", toy, "config.json", text[: len(text) // 2], []),
              case("wrong_content", toy, "config.json", [1, 2], []),
              case("wrong_content", toy, "config.json", {**config, "kT": "hot"}, ["kT"]),
              case("wrong_content", toy, "config.json", {k: v for k, v in config.items() if k != "kT"}, ["kT"]),
              case("wrong_content", toy, "config.json", {**config, "system": "argon"}, ["system"]),
              case("wrong_content", toy, "config.json", {**config, "method": "gan"}, ["method"]),
              case("wrong_content", toy, "config.json", {**config, "system": "user", "cvs": "phi"}, ["cvs"]),
              case("wrong_content", toy, "config.json", {**config, "energy_evals": "many"}, ["energy_evals"]),
              case("nan", toy, "config.json", {**config, "kT": math.nan}, ["kT"]),
              case("range", toy, "config.json", {**config, "kT": 0.0}, ["kT"]),
              case("range", toy, "config.json", {**config, "kT": -1.0}, ["kT"]),
              case("wrong_content", toy, "samples.pt", samples["cvs"], []),
              case("wrong_content", toy, "samples.pt", {k: v for k, v in samples.items() if k != "cvs"}, ["cvs"]),
              case("wrong_content", toy, "samples.pt", {**samples, "cvs": [1.0, 2.0]}, ["cvs"]),
              case("nan", toy, "samples.pt", {**samples, "cvs": nan[:, None]}, ["cvs"]),
              case("nan", toy, "samples.pt", {**samples, "log_w": nan}, ["log_w"]),
              case("nan", toy, "samples.pt", {**samples, "bias": nan}, ["bias"], "--weights", "bias"),
              case("nan", toy, "samples.pt", {**samples, "x": torch.full_like(samples["x"], math.inf)}, ["x"]),
              case("shape", toy, "samples.pt", {**samples, "cvs": samples["cvs"][:, 0]}, ["cvs"]),
              case("shape", toy, "samples.pt", {**samples, "cvs": samples["cvs"].repeat(1, 3)}, ["cvs"]),
              case("shape", toy, "samples.pt", {**samples, "log_w": samples["log_w"][:-1]}, ["log_w"]),
              case("shape", toy, "samples.pt", {**samples, "x": samples["x"][:, :1]}, ["x"]),
              case("shape", toy, "samples.pt", {k: v[:0] for k, v in samples.items()}, ["cvs"]),
              case("wrong_content", metad, "fes.pt", {"free_energy": fes}, ["fes"]),
              case("nan", metad, "fes.pt", {"fes": torch.full_like(fes, math.nan)}, ["fes"]),
              case("shape", metad, "fes.pt", {"fes": fes[0]}, ["fes"]),
              case("shape", metad, "fes.pt", {"fes": fes[:5]}, ["fes"])]  # fmt: skip
    return cases


def _export_cases(runs: dict[str, Path], roots, folder: Path) -> list[BadInput]:
    toy, metad = runs["toy"], runs["metad"]
    samples = torch.load(toy / "samples.pt", weights_only=True)
    bad = bad_files(folder / "files", ".pt", like=toy / "samples.pt")
    xyz, pdb = str(folder / "out.xyz"), str(folder / "out.pdb")
    count = iter(range(1000))

    def case(kind, file, content, names):
        run = _variant(toy, folder / f"run{next(count)}", file, content)
        return BadInput(kind, ["export", run, "--out", xyz], ["RUN", file, *names])

    cases = [BadInput("missing_file", ["export", str(folder / "nowhere"), "--out", xyz], ["RUN", "nowhere"]),
             BadInput("choice", ["export", str(toy), "--out", str(folder / "out.mol2")], ["--out", "out.mol2"]),
             BadInput("choice", ["export", str(toy), "--out", str(folder)], ["--out"]),
             BadInput("choice", ["export", str(toy), "--out", pdb], ["--out", ".xyz"]),  # a toy has no atoms
             case("missing_file", "config.json", None, []), case("missing_file", "samples.pt", None, []),
             case("empty_file", "samples.pt", b"", []),
             case("corrupt_file", "samples.pt", bad["truncated"].read_bytes(), []),
             case("pickle", "samples.pt", bad["pickle"].read_bytes(), []),
             case("wrong_content", "samples.pt", {k: v for k, v in samples.items() if k != "x"}, ["x"]),
             case("nan", "samples.pt", {**samples, "x": torch.full_like(samples["x"], math.nan)}, ["x"]),
             case("shape", "samples.pt", {**samples, "x": samples["x"][:, :1]}, ["x"]),
             case("shape", "samples.pt", {**samples, "x": samples["x"][:0]}, ["x"])]  # fmt: skip
    return cases + [BadInput(kind, ["export", str(metad), "--out", pdb, "--data-root", path], names)
                    for kind, path, names in roots]  # fmt: skip


def test_every_command_refuses_bad_input_cleanly(runs, tmp_path):
    roots = _aldp_roots(tmp_path / "roots")
    cases = _sample_cases(runs, roots) + _metad_cases(runs, roots) + _evaluate_cases(runs, tmp_path / "eval")
    cases += _export_cases(runs, roots, tmp_path / "export")
    check_bad_inputs(app, cases, pickle_marker=tmp_path / "eval" / "files" / "PICKLE_RAN")
    assert not (tmp_path / "export" / "files" / "PICKLE_RAN").exists()
    assert [c for c in uncovered_commands(app, cases) if not c.startswith("syncogen")] == []  # own test file
    assert not list((runs["toy"].parent / "new").glob("*.pt"))  # refused before any work
    assert not [*tmp_path.glob("*/out.*"), *tmp_path.glob("*/*.png")]
    _evaluates(runs["toy"])  # the run another one was refused in is intact
