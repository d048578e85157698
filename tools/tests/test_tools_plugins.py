"""Command groups contributed through entry points are listed without being imported, and load when invoked."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

from typer.testing import CliRunner

from flowlab.tools import plugins
from flowlab.tools.cli import app

MODULE = "flowlab_demo_group_for_tests"


def _demo_group(tmp_path, monkeypatch, module: str, source: str) -> None:
    """Write `source` as the module `module` and make it the only command group, `flowlab demo`, not yet imported."""
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = EntryPoint(name="demo", value=f"{module}:app", group=plugins.COMMANDS_GROUP)
    monkeypatch.setattr(plugins, "command_entry_points", lambda: {"demo": ep})
    sys.modules.pop(module, None)


def test_groups_are_lazy(tmp_path, monkeypatch):
    _demo_group(
        tmp_path,
        monkeypatch,
        MODULE,
        "import typer\n"
        "app = typer.Typer(help='demo group')\n"
        "@app.command()\n"
        "def hello(name: str = 'world'):\n"
        "    print(f'hello {name}')\n"
        "@app.command()\n"
        "def other():\n"
        "    pass\n",
    )

    runner = CliRunner()
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0 and "demo" in res.output
    assert MODULE not in sys.modules, "listing the groups must not import them"

    res = runner.invoke(app, ["demo", "hello", "--name", "flowlab"])
    assert res.exit_code == 0, res.output
    assert "hello flowlab" in res.output and MODULE in sys.modules


def test_unknown_group_is_a_usage_error():
    res = CliRunner().invoke(app, ["nosuchgroup"])
    assert res.exit_code == 2


def test_top_level_help_imports_no_torch():
    """`flowlab --help` lists every group, the tools' own included, without importing torch, numpy or any package's
    code (the core's lazy namespace and its light `cli` module hold the error boundary's pieces); so do
    `flowlab cache --help` and `flowlab data --help`."""
    import subprocess

    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from flowlab.tools.cli import app\n"
        "res = CliRunner().invoke(app, ['--help'])\n"
        "assert res.exit_code == 0 and all(n in res.output for n in ('bench', 'cache', 'data')), res.output\n"
        "for args in (['cache', '--help'], ['data', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0\n"
        "print(sorted(m for m in ('torch', 'numpy', 'flowlab.core.train', 'flowlab.datasets') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_input_errors_become_one_line_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    """A ValueError, a missing file or a corrupt pickle escaping a command: one `error:` line, exit 2; --debug lets
    the exception through; a bug (here a ZeroDivisionError) is never disguised as an input error."""
    _demo_group(
        tmp_path,
        monkeypatch,
        "flowlab_demo_errors_for_tests",
        "import pickle\n"
        "import typer\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "def fail(kind: str):\n"
        "    if kind == 'value':\n"
        "        raise ValueError('steps: expected a positive int, got -1')\n"
        "    if kind == 'missing':\n"
        "        open('/nonexistent/flowlab-file.pt')\n"
        "    if kind == 'pickle':\n"
        "        pickle.loads(b'garbage')\n"
        "    1 / 0\n",
    )
    runner = CliRunner()
    for kind, needle in (("value", "steps: expected a positive int"), ("missing", "flowlab-file.pt"),
                         ("pickle", "UnpicklingError")):  # fmt: skip
        res = runner.invoke(app, ["demo", kind])
        assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output, res.output
        assert len([line for line in res.output.splitlines() if line.strip()]) == 1
        debug = runner.invoke(app, ["--debug", "demo", kind])
        assert debug.exit_code == 1 and debug.exception is not None and not isinstance(debug.exception, SystemExit)
    bug = runner.invoke(app, ["demo", "bug"])
    assert isinstance(bug.exception, ZeroDivisionError)
