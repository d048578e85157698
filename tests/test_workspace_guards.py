"""Guard rails for the workspace: the method folders of DESIGN.md, test-file names, size budgets, declared FlowLab
dependencies, no local paths in project files, every member tested, and the no-network test plugin. The import
boundaries themselves are import-linter contracts (root pyproject.toml), checked by `lint-imports` in .ci/run."""

from __future__ import annotations

import ast
import os
import socket
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from flowlab.core.testing.plugin import (
    XDIST_ARGS,
    NetworkAccessError,
    pytest_load_initial_conftests,
    share_cores_among_workers,
)

ROOT = Path(__file__).resolve().parents[1]
#: two screens of a method README; a benchmarks file before it becomes a package
README_LINES, BENCH_LINES = 110, 300
MEMBERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "flowlab":  # `from flowlab import datasets` imports flowlab.datasets
                found |= {f"flowlab.{alias.name}" for alias in node.names}
    return found


def _member_package(member: str) -> tuple[str, Path]:
    """(python package name, its source folder) of a workspace member."""
    (src,) = [p for p in (ROOT / member / "src/flowlab").iterdir() if p.is_dir() and not p.name.startswith("_")]
    return src.name, src


def _method_folders() -> list[dict[str, str]]:
    """The method-folder table of DESIGN.md (between its <!-- method-folders --> markers)."""
    text = (ROOT / "DESIGN.md").read_text()
    table = text.split("<!-- method-folders -->")[1].split("<!-- /method-folders -->")[0]
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")] for line in table.strip().splitlines()]
    header, body = rows[0], rows[2:]
    return [dict(zip(header, row, strict=True)) for row in body]


def test_every_method_folder_in_design_exists_with_a_short_readme_and_results():
    methods = _method_folders()
    assert len(methods) >= 7, "DESIGN.md's method-folder table is missing or truncated"
    for m in methods:
        folder = ROOT / m["folder"]
        docs = folder if m["docs"] == "same folder" else ROOT / m["docs"]
        assert (folder / "__init__.py").is_file(), f"{m['method']}: no method folder {m['folder']}"
        for name in ("README.md", "RESULTS.md"):
            assert (docs / name).is_file(), f"{m['method']}: {docs.relative_to(ROOT)} has no {name}"
        lines = len((docs / "README.md").read_text().splitlines())
        assert lines <= README_LINES, (
            f"{m['method']}: README.md has {lines} lines (two screens: <= {README_LINES}); "
            "measurements go in RESULTS.md"
        )
    documented = {ROOT / m["folder"] for m in methods}
    assert not (ROOT / "packages/core/src/flowlab/core/gfm/README.md").exists(), "GFM's README lives in core/docs/gfm"
    for member in MEMBERS:
        name, src = _member_package(member)
        for readme in src.rglob("README.md"):
            assert readme.parent in documented, f"{readme.relative_to(ROOT)}: not a method folder listed in DESIGN.md"


def test_test_files_are_named_for_their_package_and_an_area_that_exists():
    for member in MEMBERS:
        name, src = _member_package(member)
        areas = {"cli", "environment", "api", "gpu"} | {p.stem for p in src.rglob("*") if p.name != "__init__.py"}
        for test in (ROOT / member / "tests").glob("test_*.py"):
            rest = test.stem.removeprefix(f"test_{name}_")
            assert rest != test.stem and any(rest == a or rest.startswith(a + "_") for a in areas), (
                f"{test.relative_to(ROOT)}: expected test_{name}_<area>[_*].py with <area> a module or folder of "
                f"flowlab.{name} (or cli, environment, api, gpu)"
            )


def test_benchmark_files_stay_within_the_size_budget():
    for member in MEMBERS:
        _, src = _member_package(member)
        files = [*src.rglob("benchmarks.py"), *(f for d in src.rglob("benchmarks") for f in d.glob("*.py"))]
        for f in files:
            lines = len(f.read_text().splitlines())
            assert lines <= BENCH_LINES, (
                f"{f.relative_to(ROOT)}: {lines} lines; past {BENCH_LINES} a benchmarks/ package, one module per family"
            )


def test_each_member_declares_exactly_the_flowlab_members_it_imports():
    """deptry sees the `flowlab` namespace as one first-party module, so this checks its portions."""
    dists = {_member_package(m)[0]: tomllib.loads((ROOT / m / "pyproject.toml").read_text())["project"]["name"]
             for m in MEMBERS}  # fmt: skip
    for member in MEMBERS:
        name, src = _member_package(member)
        project = tomllib.loads((ROOT / member / "pyproject.toml").read_text())["project"]
        declared = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in project.get("dependencies", [])}
        imported = {
            dists[mod.split(".")[1]]
            for f in src.rglob("*.py")
            for mod in _imports(f)
            if mod.startswith("flowlab.") and mod.split(".")[1] in dists and mod.split(".")[1] != name
        }
        assert imported == declared & set(dists.values()), (
            f"{member}: imports {sorted(imported)} but declares {sorted(declared & set(dists.values()))}"
        )


def test_namespace_has_no_init():
    for member in MEMBERS:
        assert not (ROOT / member / "src/flowlab/__init__.py").exists(), (
            f"{member}: flowlab must be a PEP 420 namespace"
        )


def test_no_absolute_local_paths_in_project_files():
    files = [ROOT / "pyproject.toml", ROOT / "uv.lock", *(ROOT / m / "pyproject.toml" for m in MEMBERS)]
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for token in ('"/', "'/", "file://", "= /"):
                assert token not in line, f"{f.relative_to(ROOT)}:{n} names a local path: {line.strip()}"


def test_every_member_has_a_real_test():
    for member in MEMBERS:
        tests = list((ROOT / member / "tests").glob("test_*.py"))
        assert tests, f"{member} has no tests"
        n_tests = sum(
            isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
            for t in tests
            for node in ast.walk(ast.parse(t.read_text()))
        )
        assert n_tests > 0, f"{member} has test files but no test functions"


def test_network_guard_blocks_outside_addresses():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(NetworkAccessError, match=r"93\.184\.216\.34"):
            sock.connect(("93.184.216.34", 80))
    finally:
        sock.close()
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("example.org", 443)


def test_network_guard_allows_loopback():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        client.connect(server.getsockname())
    finally:
        client.close()
        server.close()


@pytest.mark.parametrize(
    ("args", "xdist", "worker", "added"),
    [
        (["-k", "gfm"], True, None, True),  # the README's command: on every core
        (["-n", "0"], True, None, False),  # a serial run asked for
        (["-n3"], True, None, False),
        (["--numprocesses=2"], True, None, False),
        (["-k", "gfm"], False, None, False),  # no pytest-xdist (a bare GPU machine) or -p no:xdist
        (["-k", "gfm"], True, "gw0", False),  # inside a worker
    ],
)
def test_the_run_goes_on_every_core_only_with_xdist_and_no_n_given(args, xdist, worker, added, monkeypatch):
    class Plugins:
        def hasplugin(self, name: str) -> bool:
            return xdist and name == "xdist"

    class EarlyConfig:
        pluginmanager = Plugins()

    if worker:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    else:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    given = list(args)
    pytest_load_initial_conftests(EarlyConfig(), None, given)
    assert given == ([*XDIST_ARGS, *args] if added else args)


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_run_and_its_subprocesses_wait_passively_unless_told_otherwise(given, expected, monkeypatch):
    """The controller sets OMP_WAIT_POLICY before the workers start (they and their subprocesses inherit it);
    a value the user set is kept."""

    early_config = SimpleNamespace(pluginmanager=SimpleNamespace(hasplugin=lambda name: True))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    if given is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", given)
    pytest_load_initial_conftests(early_config, None, ["-n", "0"])
    assert os.environ["OMP_WAIT_POLICY"] == expected


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_each_xdist_worker_gets_its_share_of_the_threads(workers, monkeypatch):
    """N workers on C cores: torch and the subprocesses (OMP_NUM_THREADS) of each get max(1, C // N) threads; one
    process (no xdist, or -n 0) keeps torch's own default."""
    import torch

    before = torch.get_num_threads()
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(4)))
    try:
        share_cores_among_workers()
        if workers == 1:
            assert torch.get_num_threads() == before and "OMP_NUM_THREADS" not in os.environ
        else:
            assert torch.get_num_threads() == 4 // workers and os.environ["OMP_NUM_THREADS"] == str(4 // workers)
    finally:
        torch.set_num_threads(before)


#: libraries whose import alone costs seconds: a command's `--help` must not load them (every `--help` within 1 s)
HEAVY = ("torch", "scipy", "pandas", "anndata", "scanpy", "sklearn", "diffusers", "openmm", "rdkit", "gymnasium",
         "matplotlib", "ot", "torch_geometric", "tblite", "skimage")  # fmt: skip
_HELP_WALK = """
import sys
from flowlab.tools.plugins import command_entry_points, load_command
cmd = load_command(command_entry_points()[sys.argv[1]])
def walk(c, path):
    ctx = c.context_class(c, info_name=" ".join(path))
    c.get_help(ctx)
    yield path
    if hasattr(c, "list_commands"):
        for name in c.list_commands(ctx):
            yield from walk(c.get_command(ctx, name), [*path, name])
n = len(list(walk(cmd, ["flowlab", sys.argv[1]])))
print("@help-walk", n, *sorted(m for m in sys.argv[2:] if m in sys.modules))
"""


def _groups() -> list[str]:
    from flowlab.tools.plugins import command_entry_points

    return sorted(command_entry_points())


@pytest.mark.parametrize("group", _groups())
def test_every_help_of_a_group_loads_no_heavy_library(group):
    """`flowlab GROUP [COMMAND ...] --help`, for every command of every group, imports none of HEAVY: a command
    module imports its method's code inside the command, and package namespaces are lazy (`flowlab.core.lazy`)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _HELP_WALK, group, *HEAVY], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    _, n_commands, *loaded = [line for line in out.stdout.splitlines() if line.startswith("@help-walk")][-1].split()
    assert int(n_commands) >= 2, f"flowlab {group}: no commands found"
    assert not loaded, f"flowlab {group} --help imports {loaded}"


#: commands with --overwrite that write no run (nothing to resume)
NOT_RUNS = {("watermark", "keygen")}


def _commands(cmd, path):
    """(path, click command) of every leaf command under `cmd`."""
    ctx = cmd.context_class(cmd, info_name=path[-1])
    if not hasattr(cmd, "list_commands"):
        yield path, cmd
        return
    for name in cmd.list_commands(ctx):
        yield from _commands(cmd.get_command(ctx, name), (*path, name))


def test_every_training_command_has_the_same_resume_and_overwrite_flags():
    """A command that claims a run folder takes both --resume and --overwrite, with the shared help texts, so
    continuing, starting again and a fresh run (the default) are the same explicit choice in every group."""
    from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP
    from flowlab.tools.plugins import command_entry_points, load_command

    found = []
    for group, entry in sorted(command_entry_points().items()):
        for path, cmd in _commands(load_command(entry), (group,)):
            flags = {p.name: p for p in cmd.params}
            if "overwrite" not in flags or path in NOT_RUNS:
                continue
            found.append(" ".join(path))
            assert "resume" in flags, f"flowlab {' '.join(path)} has --overwrite but no --resume"
            assert (flags["resume"].help, flags["overwrite"].help) == (RESUME_HELP, OVERWRITE_HELP), path
    assert len(found) >= 14, found


def test_every_member_has_an_api_page_and_a_domain_page_in_the_docs_site():
    """The mkdocs site (mkdocs.yml, built with --strict in .ci/run) documents every member: an API page rendering
    the whole package (mkdocstrings, every public submodule) and, for the packages, a page with its README."""
    import yaml  # mkdocs's own dependency

    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    paths = set(site["plugins"][1]["mkdocstrings"]["handlers"]["python"]["paths"])
    nav = str(site["nav"])
    for member in MEMBERS:
        name, _ = _member_package(member)
        slug = Path(member).name
        api = ROOT / "docs" / "api" / f"{slug}.md"
        assert api.is_file() and f"::: flowlab.{name}\n" in api.read_text(), f"{member}: no API page {api}"
        assert f"api/{slug}.md" in nav and f"{member}/src" in paths, f"{member}: not in mkdocs.yml"
        if member.startswith("packages/"):
            page = ROOT / "docs" / "domains" / f"{slug}.md"
            assert f'"{member}/README.md"' in page.read_text(), f"{member}: its domain page does not hold its README"
