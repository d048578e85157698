"""`flowlab dna train|sample|evaluate`: a toy run trains, resumes with more steps, samples FASTA and scores; a motif
run samples a chosen class; a profile-conditional motif run trains, resumes, samples target profiles from .npy and
.pt files and scores; a unified run samples in every domain; a baseline trains and scores; bad settings, folders and
profile files are clear errors."""

import json
import re

import numpy as np
import torch
from typer.testing import CliRunner

from flowlab.biology_dynamics.cli import dna_app
from flowlab.biology_dynamics.wright_fisher.dna import read_fasta
from flowlab.biology_dynamics.wright_fisher.motifs import DEFAULT_MOTIFS, MotifTask, load_motifs, profile
from flowlab.biology_dynamics.wright_fisher.motifs import sample_motif_sequences as motif_sequences
from flowlab.core.testing import BadInput, assert_same_tensors, bad_files, check_bad_inputs

TOY = ["--task", "toy-simplex", "--letters", "4", "--length", "2", "--width", "16", "--batch", "16"]


def _ok(*args: str) -> str:
    res = CliRunner().invoke(dna_app, list(args))
    assert res.exit_code == 0, res.output
    return res.output


def _fails(*args: str) -> str:
    res = CliRunner().invoke(dna_app, list(args))
    assert res.exit_code == 2, res.output
    return " ".join(re.sub("[│╭╮╰╯─]", " ", res.output).split())  # the message without its panel


def test_toy_run_trains_resumes_samples_and_scores(tmp_path):
    run = str(tmp_path / "toy")
    _ok("train", "--out", run, *TOY, "--steps", "6")
    assert "pass --resume" in _fails("train", "--out", run, *TOY, "--steps", "9")
    _ok("train", "--out", run, *TOY, "--steps", "9", "--resume")  # continues from step 6
    assert sorted(p.name for p in (tmp_path / "toy").glob("step-*")) == ["step-000000006", "step-000000009"]
    assert "only --steps may change" in _fails("train", "--out", run, *TOY[:-4], "--width", "32", "--steps", "9")
    _ok("train", "--out", str(tmp_path / "over"), *TOY, "--steps", "3")
    _ok("train", "--out", str(tmp_path / "over"), *TOY, "--steps", "2", "--overwrite")  # starts again
    assert [p.name for p in (tmp_path / "over").glob("step-*")] == ["step-000000002"]
    fasta = tmp_path / "s.fasta"
    _ok("sample", run, "--n", "5", "--steps", "3", "--out", str(fasta))
    records = read_fasta(fasta)
    assert len(records) == 5 and all(len(seq) == 2 and set(seq) <= set("ACGT") for _, seq in records)
    out = _ok("evaluate", run, "--n", "50", "--steps", "3")
    assert out.startswith("nats ") and " kl " in out
    again = str(tmp_path / "again")  # the same settings and seed in another folder: the same model
    _ok("train", "--out", again, *TOY, "--steps", "9")
    _ok("sample", again, "--n", "5", "--steps", "3", "--out", str(tmp_path / "again.fasta"))
    assert read_fasta(tmp_path / "again.fasta") == records
    assert "expected --steps >= 9" in _fails("train", "--out", run, *TOY, "--steps", "4", "--resume")
    assert "n, steps: expected ints >= 1" in _fails("evaluate", run, "--n", "0")
    assert "only the motifs task is class-conditional" in _fails("sample", run, "--n", "2", "--class", "0")
    assert "device" in _fails("train", "--out", str(tmp_path / "d"), *TOY, "--device", "gpu")


def test_motif_run_samples_the_chosen_class(tmp_path):
    run = str(tmp_path / "motifs")
    _ok("train", "--out", run, "--domain", "masked", "--length", "40", "--width", "16", "--batch", "8", "--steps", "2")
    unified = str(tmp_path / "unified")
    _ok(
        "train",
        "--out",
        unified,
        "--domain",
        "unified",
        "--length",
        "40",
        "--width",
        "16",
        "--batch",
        "8",
        "--steps",
        "2",
    )
    assert "hit_rate" in _ok("evaluate", unified, "--n", "4", "--steps", "2", "--domain", "gaussian")
    fasta = tmp_path / "m.fasta"
    _ok("sample", run, "--n", "3", "--steps", "2", "--class", "1", "--out", str(fasta))
    assert [len(seq) for _, seq in read_fasta(fasta)] == [40, 40, 40]
    assert "hit_rate" in _ok("evaluate", run, "--n", "8", "--steps", "2")
    assert "label: expected a class in [0, 2)" in _fails("sample", run, "--n", "2", "--class", "2")
    assert "trained for 'masked'" in _fails("sample", run, "--n", "2", "--domain", "gaussian")


def test_profile_run_trains_resumes_samples_target_profiles_and_scores(tmp_path):
    args = ["--length", "40", "--width", "16", "--batch", "8", "--condition", "profile"]
    run = str(tmp_path / "profile")
    _ok("train", "--out", run, *args, "--steps", "2")
    assert json.loads((tmp_path / "profile" / "run.json").read_text())["condition"] == "profile"
    _ok("train", "--out", run, *args, "--steps", "4", "--resume")
    _ok("train", "--out", str(tmp_path / "straight"), *args, "--steps", "4")
    assert_same_tensors(tmp_path / "profile", tmp_path / "straight", "step-000000004/weights.pt")
    x, _ = motif_sequences(MotifTask(length=40, classes=2), 3, generator=torch.Generator().manual_seed(1))
    targets = profile(x, load_motifs(DEFAULT_MOTIFS[:2]), window=20)  # (3, 2, 2)
    np.save(tmp_path / "targets.npy", targets.numpy())
    torch.save(targets.float(), tmp_path / "targets.pt")
    for suffix in ("npy", "pt"):
        fasta = tmp_path / f"{suffix}.fasta"
        _ok("sample", run, "--steps", "2", "--profile", str(tmp_path / f"targets.{suffix}"), "--out", str(fasta))
        assert [len(seq) for _, seq in read_fasta(fasta)] == [40, 40, 40]  # one per target profile
    assert read_fasta(tmp_path / "npy.fasta") == read_fasta(tmp_path / "pt.fasta")  # the net reads float32
    out = _ok("evaluate", run, "--n", "8", "--steps", "2")
    assert out.startswith("nats ") and all(f" {key} " in out for key in ("hit_rate", "profile_mse", "data_profile_mse"))
    assert "profile-conditional; expected (100, 2, 2)" in _fails("sample", run, "--steps", "2")


def test_bad_profiles_and_conditions_are_named(tmp_path):
    run = tmp_path / "profile"
    _ok("train", "--out", str(run), "--length", "40", "--width", "16", "--batch", "8", "--steps", "1",
        "--condition", "profile")  # fmt: skip
    classes = tmp_path / "classes"
    _ok("train", "--out", str(classes), "--length", "40", "--width", "16", "--batch", "8", "--steps", "1")
    good = torch.zeros(3, 2, 2, dtype=torch.float64)
    np.save(tmp_path / "good.npy", good.numpy())
    nan = good.clone()
    nan[1, 0, 1] = float("nan")
    np.save(tmp_path / "nan.npy", nan.numpy())
    torch.save(good[:, :1], tmp_path / "one_motif.pt")
    np.save(tmp_path / "windows.npy", good[:, :, :1].numpy())
    torch.save({"profile": good}, tmp_path / "dict.pt")
    files = bad_files(tmp_path / "bad", ".npy", like=tmp_path / "good.npy")
    kinds = {"missing": "missing_file", "empty": "empty_file", "garbage": "corrupt_file", "pickle": "pickle",
             "truncated": "corrupt_file"}  # fmt: skip
    sample = ["sample", str(run), "--steps", "1", "--out", str(tmp_path / "s.fasta"), "--profile"]
    cases = [BadInput(kinds[name], [*sample, str(path)], ["--profile", path.name]) for name, path in files.items()]
    cases += [BadInput("nan", [*sample, str(tmp_path / "nan.npy")], ["--profile", "NaN", "(1, 0, 1)"]),
              BadInput("shape", [*sample, str(tmp_path / "one_motif.pt")], ["--profile", "(B, 2, 2)", "(3, 1, 2)"]),
              BadInput("shape", [*sample, str(tmp_path / "windows.npy")], ["--profile", "(3, 2, 1)"]),
              BadInput("wrong_content", [*sample, str(tmp_path / "dict.pt")], ["--profile", "dict"]),
              BadInput("range", [*sample, str(tmp_path / "good.npy"), "--n", "2"], ["--n", "--profile"]),
              BadInput("mixing", [*sample, str(tmp_path / "good.npy"), "--class", "1"], ["--class"]),
              BadInput("mixing", ["sample", str(classes), "--profile", str(tmp_path / "good.npy")],
                       ["--profile", "class-conditional"]),
              BadInput("choice", ["train", "--out", str(tmp_path / "x"), "--condition", "pwm"], ["--condition"]),
              BadInput("range", ["train", "--out", str(tmp_path / "x"), "--window", "5"], ["--window", "widest"]),
              BadInput("mixing", ["train", "--out", str(tmp_path / "x"), "--task", "markov", "--condition", "profile"],
                       ["--condition"])]  # fmt: skip
    check_bad_inputs(dna_app, cases, pickle_marker=tmp_path / "bad" / "PICKLE_RAN")
    assert not (tmp_path / "x").exists()


def test_unified_run_samples_in_any_domain_and_bad_input_is_named(tmp_path):
    run = str(tmp_path / "unified")
    _ok("train", "--out", run, *TOY, "--domain", "unified", "--steps", "3")
    for name in ("discrete", "gaussian", "simplicial"):
        _ok("sample", run, "--n", "2", "--steps", "2", "--domain", name, "--out", str(tmp_path / f"{name}.fasta"))
    assert "samples in one of" in _fails("sample", run, "--n", "2", "--domain", "masked")
    chain = str(tmp_path / "markov")
    _ok("train", "--out", chain, "--task", "markov", "--length", "6", "--width", "16", "--batch", "16", "--steps", "3")
    out = _ok("evaluate", chain, "--n", "20", "--steps", "2")
    assert out.startswith("nats ") and " exact_nll " in out and " kl " in out
    baseline = str(tmp_path / "ddsm")
    _ok("train", "--out", baseline, *TOY, "--domain", "ddsm-lite", "--steps", "2")
    out = _ok("evaluate", baseline, "--n", "20", "--steps", "2")
    assert out.startswith("exact_nll ") and " kl " in out  # no likelihood: no nats
    assert "domain" in _fails("train", "--out", str(tmp_path / "x"), "--domain", "nope")
    assert "not a run folder" in _fails("sample", str(tmp_path))
    assert "letters: the motifs task is DNA" in _fails("train", "--out", str(tmp_path / "z"), "--letters", "5")
    assert "lr: expected a finite learning rate" in _fails("train", "--out", str(tmp_path / "z"), "--lr", "-1")
    locked = str(tmp_path / "locked")  # a refused first run leaves nothing behind that refuses the corrected one
    assert "classes" in _fails("train", "--out", locked, "--classes", "9", "--length", "40", "--steps", "1")
    _ok("train", "--out", locked, "--classes", "2", "--length", "40", "--width", "16", "--batch", "4", "--steps", "1")
