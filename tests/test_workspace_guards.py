"""Guard rails for the workspace: import boundaries, no local paths in project files, every member tested,
and the no-network test plugin."""

from __future__ import annotations

import ast
import socket
import tomllib
from pathlib import Path

import pytest

from flowlab.core.testing.plugin import NetworkAccessError

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ("vision_gen", "molecular", "rl_control", "biology_dynamics", "crowd_sim", "trust_ood")
MEMBERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _flowlab_packages_imported(src: Path) -> dict[str, set[str]]:
    """file -> the flowlab subpackages it imports."""
    out = {}
    for f in src.rglob("*.py"):
        pkgs = {m.split(".")[1] for m in _imports(f) if m.startswith("flowlab.") and m.count(".") >= 1}
        if pkgs:
            out[str(f.relative_to(ROOT))] = pkgs
    return out


def test_core_imports_no_other_flowlab_package():
    bad = {f: p - {"core"} for f, p in _flowlab_packages_imported(ROOT / "packages/core/src").items() if p - {"core"}}
    assert not bad, f"flowlab.core must not import other FlowLab packages: {bad}"


@pytest.mark.parametrize("domain", DOMAINS)
def test_domain_packages_do_not_import_each_other(domain):
    folder = ROOT / "packages" / domain.replace("_", "-") / "src"
    allowed = {"core", "datasets", domain}
    bad = {f: p - allowed for f, p in _flowlab_packages_imported(folder).items() if p - allowed}
    assert not bad, f"flowlab.{domain} may import only flowlab.core and flowlab.datasets: {bad}"


def test_datasets_imports_only_core():
    bad = {f: p - {"core", "datasets"} for f, p in _flowlab_packages_imported(ROOT / "datasets/src").items()}
    assert not any(bad.values()), bad


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
