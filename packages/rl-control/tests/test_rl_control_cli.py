"""`flowlab rl`: collect -> train (offline, then online) -> evaluate through the package's command group, and bad
options."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from flowlab.rl_control.cli import app
from flowlab.rl_control.envs.scores import score_returns

runner = CliRunner()


def test_the_group_mounts_value_flows_and_mac_flow_commands():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    assert all(
        name in res.output for name in ("collect", "train", "evaluate", "marl-collect", "marl-train", "marl-evaluate")
    )


def test_cli_collect_train_online_and_evaluate(tmp_path):
    data, run = tmp_path / "d.npz", tmp_path / "run"
    res = runner.invoke(app, ["collect", "--quality", "random", "--transitions", "300", "--out", str(data)])
    assert res.exit_code == 0, res.output
    args = ["train", "--dataset", str(data), "--method", "td", "--steps", "5", "--out", str(run)]
    res = runner.invoke(app, [*args, "--policy-extraction", "onestep", "--online-steps", "4", "--n-envs", "2"])
    assert res.exit_code == 0, res.output
    assert "online: 0 episodes" in res.output and (run / "online").is_dir()
    out = tmp_path / "scores" / "eval.json"
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--episodes", "2", "--out", str(out)])
    assert res.exit_code == 0 and "return" in res.output and "normalised" in res.output, res.output
    record = json.loads(out.read_text())
    assert record["env"] == "Pendulum-v1" and record["method"] == "td" and len(record["returns"]) == 2
    assert record["mean_return"] == pytest.approx(np.mean(record["returns"]))
    assert record["normalised_return"] == score_returns(record["returns"], "Pendulum-v1")["normalised_return"]
    res = runner.invoke(app, [*args, "--policy-extraction", "best"])
    assert res.exit_code == 2 and "policy_extraction" in res.output
    # another agent into the same folder is refused, not resumed on top of these weights; --overwrite replaces it
    res = runner.invoke(app, [*args, "--policy-extraction", "rejection"])
    assert res.exit_code == 2 and "another run" in res.output, res.output
    res = runner.invoke(app, [*args, "--policy-extraction", "rejection", "--overwrite"])
    assert res.exit_code == 0 and not (run / "online").exists(), res.output
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--episodes", "2"])
    assert res.exit_code == 0 and "return" in res.output, res.output


def test_bad_options_and_missing_files_fail_with_exit_code_2(tmp_path):
    data = tmp_path / "d.npz"
    res = runner.invoke(app, ["collect", "--env", "NoSuchEnv-v9", "--transitions", "10", "--out", str(data)])
    assert res.exit_code == 2 and "NoSuchEnv-v9" in res.output
    res = runner.invoke(app, ["collect", "--quality", "great", "--transitions", "10", "--out", str(data)])
    assert res.exit_code == 2 and "quality" in res.output
    res = runner.invoke(app, ["train", "--dataset", str(tmp_path / "missing.npz")])
    assert res.exit_code == 2 and "flowlab rl collect" in res.output
    res = runner.invoke(app, ["collect", "--quality", "random", "--transitions", "50", "--out", str(data)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["train", "--dataset", str(data), "--method", "sac", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "method" in res.output
    res = runner.invoke(app, ["evaluate", "--run", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "run.json" in res.output
    # a dataset of another environment is refused before training, not at the first evaluation
    res = runner.invoke(app, ["collect", "--env", "reacher", "--quality", "random", "--transitions", "50",
                              "--out", str(tmp_path / "reacher.npz")])  # fmt: skip
    assert res.exit_code == 0, res.output
    for env in ("pendulum", "chain"):
        res = runner.invoke(app, ["train", "--dataset", str(tmp_path / "reacher.npz"), "--env", env, "--steps", "2",
                                  "--out", str(tmp_path / f"r_{env}")])  # fmt: skip
        assert res.exit_code == 2 and "dataset" in res.output and "observations" in res.output, res.output
        assert not (tmp_path / f"r_{env}").exists()


def test_marl_collect_train_resume_and_evaluate(tmp_path):
    data, run = tmp_path / "xor.npz", tmp_path / "run"
    res = runner.invoke(app, ["marl-collect", "--env", "xor", "--transitions", "400", "--out", str(data)])
    assert res.exit_code == 0 and "2 agents" in res.output, res.output
    args = ["marl-train", "--dataset", str(data), "--env", "xor", "--hidden", "16", "--out", str(run)]
    res = runner.invoke(app, [*args, "--steps", "3"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, [*args, "--steps", "3", "--resume"])  # continues both (finished) stages
    assert res.exit_code == 0 and "bc trained before, policy trained before" in res.output, res.output
    out = tmp_path / "marl.json"
    res = runner.invoke(app, ["marl-evaluate", "--run", str(run), "--episodes", "50", "--latency-repeats", "2",
                              "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0 and "return" in res.output and "network calls" in res.output, res.output
    record = json.loads(out.read_text())
    assert (
        record["env"] == "xor" and len(record["returns"]) == 50 and [r["batch"] for r in record["latency"]] == [1, 256]
    )
    assert record["normalised_return"] == score_returns(record["returns"], "xor")["normalised_return"]
    spread = tmp_path / "spread.npz"
    res = runner.invoke(app, ["marl-collect", "--agents", "2", "--transitions", "50", "--out", str(spread)])
    assert res.exit_code == 0, res.output
    srun = tmp_path / "srun"
    res = runner.invoke(
        app,
        [
            "marl-train",
            "--dataset",
            str(spread),
            "--method",
            "gaussian_bc",
            "--hidden",
            "8",
            "--steps",
            "2",
            "--out",
            str(srun),
        ],
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["marl-evaluate", "--run", str(srun), "--episodes", "2", "--latency-repeats", "0"])
    assert res.exit_code == 0 and "over 2" in res.output, res.output


def test_marl_commands_refuse_bad_input_with_one_line_and_exit_code_2(tmp_path):
    def fails(args, *needles):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.output
        assert all(n in res.output for n in needles), res.output

    data = tmp_path / "x.npz"
    fails(["marl-collect", "--env", "chess", "--out", str(data)], "env", "chess")
    fails(["marl-collect", "--quality", "great", "--transitions", "10", "--out", str(data)], "quality")
    fails(["marl-collect", "--env", "xor", "--transitions", "0", "--out", str(data)], "transitions")
    fails(["marl-collect", "--agents", "1", "--transitions", "10", "--out", str(data)], "n_agents")
    assert (
        runner.invoke(app, ["marl-collect", "--env", "xor", "--transitions", "50", "--out", str(data)]).exit_code == 0
    )
    train = ["marl-train", "--dataset", str(data), "--env", "xor", "--steps", "2", "--out", str(tmp_path / "r")]
    fails(["marl-train", "--dataset", str(tmp_path / "missing.npz")], "marl-collect")
    fails([*train, "--method", "sac"], "method")
    fails([*train, "--mixer", "max"], "mixer")
    fails([*train, "--hidden", "wide"], "hidden")
    fails([*train, "--gamma", "1.5"], "gamma")
    fails([*train, "--steps", "0"], "steps")
    fails([*train, "--device", "tpu"], "device")
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"\x00" * 64)
    fails(["marl-train", "--dataset", str(corrupt), "--out", str(tmp_path / "r2")], "not a readable npz")
    single = tmp_path / "single.npz"
    assert (
        runner.invoke(app, ["collect", "--quality", "random", "--transitions", "30", "--out", str(single)]).exit_code
        == 0
    )
    fails(["marl-train", "--dataset", str(single), "--out", str(tmp_path / "r3")], "no agent axis")
    fails(["train", "--dataset", str(data), "--out", str(tmp_path / "r4")], "single-agent")  # Value Flows
    assert runner.invoke(app, [*train, "--hidden", "8"]).exit_code == 0
    fails([*train, "--hidden", "16"], "--out", "another run")
    fails(["marl-evaluate", "--run", str(tmp_path / "nothing")], "run.json")
    fails(["marl-evaluate", "--run", str(tmp_path / "r"), "--episodes", "0"], "episodes")
    weights = next((tmp_path / "r" / "policy").glob("step-*")) / "weights.pt"
    weights.write_bytes(b"garbage")
    fails(["marl-evaluate", "--run", str(tmp_path / "r")], "corrupt")


def test_evaluate_refuses_zero_episodes_before_any_work(tmp_path):
    res = runner.invoke(app, ["evaluate", "--run", str(tmp_path), "--episodes", "0"])
    assert res.exit_code == 2 and "--episodes" in res.output and "n_envs" not in res.output, res.output


def test_train_reads_d4rl_style_and_minari_datasets(tmp_path, make_episodes, write_minari, write_d4rl):
    episodes = make_episodes([5, 3, 4])  # Pendulum's shapes: 3-D observations, 1-D actions
    flat = {k: np.concatenate([ep[k] for ep in episodes]) for k in ("actions", "rewards")}
    d4rl = {"observations": np.concatenate([ep["observations"][:-1] for ep in episodes]),
            "next_observations": np.concatenate([ep["observations"][1:] for ep in episodes]), **flat,
            "terminals": np.concatenate([ep["terminations"] for ep in episodes]),
            "timeouts": np.concatenate([ep["truncations"] for ep in episodes])}  # fmt: skip
    datasets = [write_d4rl(tmp_path / "d4rl.hdf5", d4rl), write_d4rl(tmp_path / "d4rl.npz", d4rl),
                write_minari(tmp_path / "minari", episodes)]  # fmt: skip
    for i, dataset in enumerate(datasets):
        args = ["train", "--dataset", str(dataset), "--method", "td", "--steps", "1", "--batch-size", "4"]
        res = runner.invoke(app, [*args, "--out", str(tmp_path / f"run{i}")])
        assert res.exit_code == 0 and "trained td for 1 steps" in res.output, res.output
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "run2"), "--resume"])  # the folder's digest is stable
    assert res.exit_code == 0, res.output
