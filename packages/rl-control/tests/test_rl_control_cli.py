"""`flowlab rl`: collect -> train (offline, then online) -> evaluate through the package's command group, and bad
options."""

from __future__ import annotations

from typer.testing import CliRunner

from flowlab.rl_control.cli import app

runner = CliRunner()


def test_the_group_mounts_value_flows_commands():
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    assert all(name in res.output for name in ("collect", "train", "evaluate"))


def test_cli_collect_train_online_and_evaluate(tmp_path):
    data, run = tmp_path / "d.npz", tmp_path / "run"
    res = runner.invoke(app, ["collect", "--quality", "random", "--transitions", "300", "--out", str(data)])
    assert res.exit_code == 0, res.output
    args = ["train", "--dataset", str(data), "--method", "td", "--steps", "5", "--out", str(run)]
    res = runner.invoke(app, [*args, "--policy-extraction", "onestep", "--online-steps", "4", "--n-envs", "2"])
    assert res.exit_code == 0, res.output
    assert "online: 0 episodes" in res.output and (run / "online").is_dir()
    res = runner.invoke(app, ["evaluate", "--run", str(run), "--episodes", "2"])
    assert res.exit_code == 0 and "return" in res.output, res.output
    res = runner.invoke(app, [*args, "--policy-extraction", "best"])
    assert res.exit_code == 2 and "policy_extraction" in res.output


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
