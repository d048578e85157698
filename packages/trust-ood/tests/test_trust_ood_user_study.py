"""The certificate of a user's own regressor on the user's own arrays (heat pairs at tiny sizes): `fit_certificate`
and `certify` from Python with the package's Psi and with a user's module, `flowlab trust train --data` and
`certify --inputs` from the CLI, and the refusals of arrays and options that do not fit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from flowlab.trust_ood.certificate import (
    CNN1d,
    PDEConfig,
    StudyConfig,
    certify,
    evaluate_study,
    fit_certificate,
    generate,
    load_study,
    save_study,
)
from flowlab.trust_ood.cli import app

#: the smallest study: 24 pairs (8 held out for the threshold), two steps of every training, two ODE steps
TINY = StudyConfig(calib=8, regressor_steps=2, score_steps=2, ensemble_size=2, ode_steps=2, batch_size=8,
                   regressor="cnn")  # fmt: skip
STEPS = ["--calib", "8", "--regressor-steps", "1", "--score-steps", "1", "--regressor", "cnn", "--ode-steps", "1"]
runner = CliRunner()


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def heat() -> dict[str, np.ndarray]:
    """A user's arrays, exported from the heat PDE: ID pairs, fresh ID inputs and shifted (bumps) inputs, n = 32."""
    pde = PDEConfig.default("heat", 32)
    train = generate(pde, "id", 24, seed=0)
    fresh, shifted = generate(pde, "id", 4, seed=1).u0, generate(pde, "bumps", 4, seed=2).u0
    return {"inputs": train.u0, "outputs": train.u_final, "id": fresh, "bumps": shifted}


class Tiny(nn.Module):
    """A user's regressor: inputs (B, n) -> outputs (B, n)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.linear(inputs)


def test_a_study_on_heat_arrays_certifies_and_round_trips(heat, tmp_path, one_thread):
    models = fit_certificate(heat["inputs"], heat["outputs"], config=TINY, generator=_g(0))
    assert models.config.pde is None and models.config.train_pairs == 16 and models.calib_inputs.shape == (8, 1, 32)
    assert len(models.ensemble) == 2 and isinstance(models.regressor, CNN1d)
    res = certify(models, heat["bumps"], generator=_g(1))
    assert res.scores.shape == (4,) and res.predictions.shape == (4, 32) and math.isfinite(res.threshold)
    assert res.ood.dtype == torch.bool and torch.equal(res.ood, res.scores < res.threshold)
    save_study(models, tmp_path / "run")
    again = certify(load_study(tmp_path / "run"), heat["bumps"], generator=_g(1))
    assert torch.allclose(again.scores, res.scores) and again.threshold == pytest.approx(res.threshold)
    with pytest.raises(ValueError, match="inputs: expected grid size 32"):
        certify(models, heat["bumps"][:, :16])
    with pytest.raises(ValueError, match="pde: this study was trained on the user's arrays"):
        evaluate_study(models, device="cpu", generator=_g(2))


def test_a_users_own_regressor_is_certified(heat, tmp_path, one_thread):
    torch.manual_seed(0)
    net = Tiny(32)
    inputs = torch.as_tensor(heat["inputs"])  # tensors or arrays alike
    models = fit_certificate(inputs, heat["outputs"], regressor=net, config=TINY, generator=_g(0))
    assert models.config.ensemble_size == 1 and models.ensemble == [models.regressor]
    res = certify(models, heat["id"], variant="y|x", generator=_g(1))
    with torch.no_grad():
        assert torch.allclose(res.predictions, net(torch.as_tensor(heat["id"], dtype=torch.float32)))
    assert res.variant == "y|x" and res.scores.shape == (4,)
    with pytest.raises(ValueError, match="models: save_study saves the package's Psi"):
        save_study(models, tmp_path / "run")
    clipped = fit_certificate(inputs, heat["outputs"], regressor=lambda x: x[:, :8], config=TINY, generator=_g(0))
    with pytest.raises(
        ValueError, match=r"regressor: expected outputs of shape \(8, 32\) like its inputs, got \(8, 8\)"
    ):
        certify(clipped, heat["id"])


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda x, y: (x[:, None], y[:, None]), r"inputs: expected a non-empty 2-D array \(N, n\)"),
        (lambda x, y: (x, y[:-1]), r"outputs: expected shape \(24, 32\) like the inputs"),
        (lambda x, y: (np.where(x > 0.5, np.nan, x), y), "inputs: contains NaN"),
        (lambda x, y: (x[:, :31], y[:, :31]), "inputs: grid size 31 is not divisible by 2"),
        (lambda x, y: (x[:9], y[:9]), r"inputs: 9 pairs; expected at least 10 \(8 held out\)"),
        (lambda x, y: (x, y.astype(complex)), "outputs: expected real numbers"),
    ],
)
def test_arrays_that_do_not_fit_are_refused_before_training(heat, edit, match):
    inputs, outputs = edit(heat["inputs"], heat["outputs"])
    with pytest.raises(ValueError, match=match):
        fit_certificate(inputs, outputs, config=TINY, generator=_g(0))


def _ok(*args) -> str:
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def _refused(option: str, *args) -> None:
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 2 and option in res.output, res.output


def test_train_and_certify_on_arrays_from_the_cli(heat, tmp_path, one_thread):
    data, new, run = tmp_path / "train.npz", tmp_path / "new.npz", tmp_path / "run"
    np.savez(data, inputs=heat["inputs"], outputs=heat["outputs"])
    np.savez(new, inputs=np.concatenate([heat["id"], heat["bumps"]]))
    _ok("train", "--data", data, "--out", run, *STEPS)
    out = _ok("certify", "--run", run, "--inputs", new, "--out", tmp_path / "c.json")
    rows = [line for line in out.splitlines() if line.startswith("inputs[")]
    assert len(rows) == 8 and all(line.split()[-1] in ("ok", "OOD") for line in rows)
    record = json.loads((tmp_path / "c.json").read_text())
    assert len(record["scores"]) == 8 and all(isinstance(f, bool) for f in record["ood"])
    assert record["ood"] == [s < record["threshold"] for s in record["scores"]]

    folder = tmp_path / "arrays"  # a folder of .npy files, and the first run's Psi certified by a second study
    folder.mkdir()
    np.save(folder / "inputs.npy", heat["inputs"])
    np.save(folder / "outputs.npy", heat["outputs"])
    psi = run / "regressor_0.pt"
    _ok("train", "--data", folder, "--out", tmp_path / "run2", *STEPS, "--regressor-weights", psi)
    given = load_study(tmp_path / "run2")
    assert len(given.ensemble) == 1
    assert all(torch.equal(a, b) for a, b in zip(given.regressor.state_dict().values(),
                                                 load_study(run).regressor.state_dict().values()))  # fmt: skip

    _refused("--run", "evaluate", "--run", run)
    _refused("--inputs", "certify", "--run", run)
    _refused("--family", "certify", "--run", run, "--inputs", new, "--family", "bumps")
    for option, value in (("--pde", "heat"), ("--n", "32"), ("--pairs", "8")):
        _refused(option, "train", "--data", data, "--out", tmp_path / "no", *STEPS, option, value)
    _refused("--regressor-weights", "train", "--out", tmp_path / "no", "--regressor-weights", psi)
    pde_run = tmp_path / "heat"
    _ok("train", "--out", pde_run, "--pairs", "8", *STEPS)
    _refused("--inputs", "certify", "--run", pde_run, "--inputs", new)
    assert not (tmp_path / "no").exists()
