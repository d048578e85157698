"""`flowlab molecular sample|metad|evaluate` on tiny budgets."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from openmm.app import PDBFile
from openmm.unit import nanometer
from typer.testing import CliRunner

from flowlab.molecular.cli import app
from flowlab.molecular.wt_asbs.asbs import ASBSConfig
from flowlab.molecular.wt_asbs.benchmarks.sn2 import SN2
from flowlab.molecular.wt_asbs.benchmarks.toy import TOY


def test_cli_metad_then_evaluate(tmp_path, aldp_root):
    runner = CliRunner()
    run = tmp_path / "metad"
    res = runner.invoke(app, ["metad", "--steps", "1000", "--out", str(run), "--data-root", str(aldp_root)])
    assert res.exit_code == 0, res.output
    assert (run / "fes.pt").is_file() and (run / "config.json").is_file()
    res = runner.invoke(app, ["evaluate", str(run)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert report["energy_evals"] == 1000 and math.isfinite(report["dF_aR_kjmol"])
    samples = torch.load(run / "samples.pt", weights_only=True)  # positions recorded with the CVs, every 100 steps
    assert samples["x"].shape == (10, 66) and samples["cvs"].shape == (10, 2)
    res = runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "metad.pdb"), "--data-root", str(aldp_root)])
    assert res.exit_code == 0, res.output
    pdb = PDBFile(str(tmp_path / "metad.pdb"))
    assert pdb.topology.getNumAtoms() == 22 and pdb.getNumFrames() == 10
    got = np.stack([pdb.getPositions(asNumpy=True, frame=i).value_in_unit(nanometer) for i in range(10)])
    np.testing.assert_allclose(got, samples["x"].reshape(10, 22, 3).numpy(), rtol=0, atol=0.0005 / 10 + 1e-9)
    res = runner.invoke(app, ["evaluate", str(tmp_path)])
    assert res.exit_code != 0 and "config.json" in res.output


def test_cli_samples_aldp_on_internal_coordinates_and_exports_positions(tmp_path, monkeypatch, aldp_root):
    """--variant cpu (here at the smoke size): the sampler works on internal coordinates, samples.pt holds Cartesian
    positions whose torsions are the recorded CVs, and export writes them; cpu is aldp's alone."""
    from flowlab.molecular.wt_asbs.benchmarks.aldp import ALDP
    from flowlab.molecular.wt_asbs.cvs import TorsionCV

    monkeypatch.setitem(ALDP.variants, "cpu", ALDP.variants["smoke"])
    runner = CliRunner()
    run = tmp_path / "aldp"
    args = ["sample", "--system", "aldp", "--variant", "cpu", "--n", "8", "--out", str(run)]
    res = runner.invoke(app, [*args, "--data-root", str(aldp_root)])
    assert res.exit_code == 0, res.output
    samples = torch.load(run / "samples.pt", weights_only=True)
    assert samples["x"].shape == (8, 66)
    torch.testing.assert_close(TorsionCV((4, 6, 8, 14))(samples["x"].double()), samples["cvs"][:, 0], atol=1e-4, rtol=0)
    res = runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "aldp.dcd"), "--data-root", str(aldp_root)])
    assert res.exit_code == 0 and (tmp_path / "aldp.dcd").stat().st_size > 0, res.output
    res = runner.invoke(app, ["sample", "--system", "four-well", "--variant", "cpu", "--out", str(tmp_path / "fw")])
    assert res.exit_code != 0 and "quick|full" in res.output


def test_cli_sample_then_evaluate_sn2(tmp_path, monkeypatch, tiny_sn2):
    monkeypatch.setitem(SN2.variants, "quick", tiny_sn2)
    runner = CliRunner()
    run = tmp_path / "sn2"
    res = runner.invoke(app, ["sample", "--system", "sn2", "--n", "16", "--out", str(run)])
    assert res.exit_code == 0, res.output
    assert json.loads((run / "config.json").read_text())["energy_evals"] == 2 * 8  # no path weights on molecules
    res = runner.invoke(app, ["evaluate", str(run)])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output.strip().splitlines()[-1])
    assert report["system"] == "sn2" and set(report["well_fractions"]) == {"reactant", "product"}


def test_cli_samples_sn2_on_internal_coordinates_and_saves_positions(tmp_path, monkeypatch):
    """--variant cpu (here at the smoke size): SN2 on its 12 internal coordinates, samples.pt holds positions whose
    xi is the recorded CV, and they export as XYZ."""
    from flowlab.molecular.wt_asbs.sn2 import reaction_cv

    monkeypatch.setitem(SN2.variants, "cpu", SN2.variants["smoke"])
    runner = CliRunner()
    run = tmp_path / "sn2"
    res = runner.invoke(app, ["sample", "--system", "sn2", "--variant", "cpu", "--n", "8", "--out", str(run)])
    assert res.exit_code == 0, res.output
    samples = torch.load(run / "samples.pt", weights_only=True)
    assert samples["x"].shape == (8, 18) and samples["cvs"].shape == (8, 1)
    torch.testing.assert_close(reaction_cv()(samples["x"].double()), samples["cvs"].double(), atol=1e-5, rtol=0)
    res = runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "sn2.xyz")])
    assert res.exit_code == 0 and (tmp_path / "sn2.xyz").read_text().startswith("6\n"), res.output


def test_cli_toy_sample_then_evaluate_with_each_weighting(tmp_path, monkeypatch):
    quick = TOY.variants["quick"]
    tiny = ASBSConfig(stages="AC", adjoint_epochs=2, corrector_epochs=1, steps_per_epoch=2, sde_steps=10,
                      skip_epochs=0, new_samples=32)  # fmt: skip
    monkeypatch.setitem(TOY.variants, "quick", replace(quick, sampler=replace(quick.sampler, asbs=tiny)))
    runner = CliRunner()

    def evaluate(run, *extra):
        res = runner.invoke(app, ["evaluate", str(run), *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.output.strip().splitlines()[-1])

    for bias, steps in (("on", 6), ("off", 3)):  # the curriculum's 3 epochs of 2 or 1 steps
        run = tmp_path / bias
        args = ["--system", "four-well", "--bias", bias, "--n", "64", "--steps", str(steps), "--out", str(run)]
        res = runner.invoke(app, ["sample", *args])
        assert res.exit_code == 0, res.output
        assert "epoch 1/3 (A)" in res.output and "epoch 3/3 (C)" in res.output  # progress, one line an epoch
        config = json.loads((run / "config.json").read_text())
        assert config["train_steps"] == steps and config["samples_seen"] == steps * tiny.batch_size
        assert torch.load(run / "samples.pt", weights_only=True)["log_w"].shape == (64,)
        report = evaluate(run)
        assert report["weights"] == "path" and 0 < report["ess_frac"] <= 1 and math.isfinite(report["dF_kT"])
        assert evaluate(run, "--weights", "none")["weights"] == "none"
    assert evaluate(tmp_path / "on", "--weights", "bias")["weights"] == "bias"
    res = runner.invoke(app, ["evaluate", str(tmp_path / "off"), "--weights", "bias"])
    assert res.exit_code != 0 and "WT-ASBS" in res.output
    res = runner.invoke(app, ["evaluate", str(tmp_path / "on"), "--weights", "exp"])
    assert res.exit_code != 0 and "--weights" in res.output
    (tmp_path / "on" / "samples.pt").write_bytes(b"")  # an emptied samples file: one clean line, exit 2
    res = runner.invoke(app, ["evaluate", str(tmp_path / "on")])
    assert res.exit_code == 2 and "corrupt" in res.output, res.output


def test_metad_settings_are_checked_before_openmm_runs():
    from flowlab.molecular.wt_asbs.reference import openmm_wtmetad

    cases = [({"steps": 0}, "steps"), ({"steps": 1000, "bias_factor": -1.0}, "bias_factor"),
             ({"steps": 1000, "height": math.nan}, "height"), ({"steps": 1000, "height": -5.0}, "height")]  # fmt: skip
    for kw, name in cases:
        with pytest.raises(ValueError, match=f"^{name}:"):
            openmm_wtmetad("missing.prmtop", "missing.inpcrd", **kw)


def test_evaluate_refuses_a_config_without_its_keys(tmp_path):
    runner = CliRunner()
    (tmp_path / "config.json").write_text(json.dumps({"method": "asbs", "kT": 1.0}))
    res = runner.invoke(app, ["evaluate", str(tmp_path)])
    assert res.exit_code == 2 and "system" in res.output and "KeyError" not in res.output, res.output
    (tmp_path / "config.json").write_text("{")
    res = runner.invoke(app, ["evaluate", str(tmp_path)])
    assert res.exit_code == 2 and "JSON" in res.output, res.output
