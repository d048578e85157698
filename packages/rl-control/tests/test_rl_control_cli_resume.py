"""A resumed `flowlab rl train` or `marl-train` run ends bit-identical to the uninterrupted run with the same settings
and seed: offline training grown to more steps, an online phase interrupted and run again, MAC-Flow interrupted in its
policy stage; a rerun that could not continue its run is refused."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from flowlab.core.testing import assert_same_tensors, ctrl_c_at
from flowlab.rl_control.cli import app
from flowlab.rl_control.mac_flow import model as mac_flow_model
from flowlab.rl_control.value_flows import online
from flowlab.rl_control.value_flows.names import METHODS

runner = CliRunner()


def _run(*args: str, code: int = 0) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == code, res.output
    return res.output


@pytest.mark.parametrize("method", METHODS)
def test_offline_training_grown_to_more_steps_ends_as_the_uninterrupted_run(tmp_path, method):
    """`rl train --steps 3`, then `--steps 6` into the same folder, equals `--steps 6` in another folder."""
    data = tmp_path / "chain.npz"
    _run("collect", "--env", "chain", "--transitions", "200", "--out", str(data))
    args = ["train", "--dataset", str(data), "--env", "chain", "--method", method, "--batch-size", "16"]
    _run(*args, "--steps", "3", "--out", str(tmp_path / "a"))
    assert "pass --resume" in _run(*args, "--steps", "6", "--out", str(tmp_path / "a"), code=2)
    _run(*args, "--steps", "6", "--out", str(tmp_path / "a"), "--resume")
    _run(*args, "--steps", "6", "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "step-000000006/weights.pt")


def test_an_interrupted_online_phase_runs_again_as_the_uninterrupted_one(tmp_path, monkeypatch):
    """Ctrl-C in the online phase (its environment state is not saved), then the same command: the offline weights
    are loaded and the online phase runs again from them, ending bit-identical to an uninterrupted run. Its lengths
    and environment copies are part of the run, as is the batch size: changing them is refused, not resumed."""
    data = tmp_path / "d.npz"
    _run("collect", "--quality", "random", "--transitions", "300", "--out", str(data))
    args = ["train", "--dataset", str(data), "--method", "td", "--batch-size", "16", "--steps", "4",
            "--online-steps", "6", "--n-envs", "2"]  # fmt: skip
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, online, "noisy_step", 3)
        _run(*args, "--out", str(tmp_path / "a"), code=130)
    assert not (tmp_path / "a" / "online").exists()
    resumed = _run(*args, "--out", str(tmp_path / "a"), "--resume")
    fresh = _run(*args, "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "**/weights.pt")
    assert re.findall(r"online: .*", resumed) == re.findall(r"online: .*", fresh)
    for changed in (["--online-steps", "8"], ["--steps", "8"], ["--n-envs", "1"], ["--batch-size", "8"]):
        assert "another run" in _run(*args, *changed, "--out", str(tmp_path / "a"), code=2)


def test_mac_flow_interrupted_in_its_policy_stage_resumes_bit_exactly(tmp_path, monkeypatch):
    """Ctrl-C in MAC-Flow's policy stage, then the same command: the finished BC stage is loaded (with the RNG states
    it ended with) and the policy stage trains as in an uninterrupted run, to the same weights and reported loss.
    More steps are refused once the policy stage has begun on the BC stage's weights; a one-stage baseline grows."""
    data = tmp_path / "xor.npz"
    _run("marl-collect", "--env", "xor", "--transitions", "200", "--out", str(data))
    args = ["marl-train", "--dataset", str(data), "--env", "xor", "--hidden", "8", "--batch-size", "16"]
    with monkeypatch.context() as patch:
        ctrl_c_at(patch, mac_flow_model, "distillation_loss", 2)
        _run(*args, "--steps", "3", "--out", str(tmp_path / "a"), code=130)
    assert [p.parent.name for p in (tmp_path / "a").glob("*/step-*")] == ["bc"]
    resumed = _run(*args, "--steps", "3", "--out", str(tmp_path / "a"), "--resume")
    fresh = _run(*args, "--steps", "3", "--out", str(tmp_path / "b"))
    assert_same_tensors(tmp_path / "a", tmp_path / "b", "*/step-*/weights.pt")
    assert "bc trained before" in resumed
    assert re.findall(r"policy loss \S+", resumed) == re.findall(r"policy loss \S+", fresh) != []
    assert "has begun" in _run(*args, "--steps", "6", "--out", str(tmp_path / "a"), "--resume", code=2)
    bc = [*args, "--method", "gaussian_bc"]
    _run(*bc, "--steps", "3", "--out", str(tmp_path / "c"))
    _run(*bc, "--steps", "6", "--out", str(tmp_path / "c"), "--resume")
    _run(*bc, "--steps", "6", "--out", str(tmp_path / "d"))
    assert_same_tensors(tmp_path / "c", tmp_path / "d", "bc/step-000000006/weights.pt")
