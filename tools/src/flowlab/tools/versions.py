"""Versions of every FlowLab member and of the libraries results depend on."""

from __future__ import annotations

import platform
import subprocess
from importlib.metadata import PackageNotFoundError, distributions, version
from pathlib import Path

KEY_LIBRARIES = (
    "torch",
    "numpy",
    "pot",
    "diffusers",
    "torch-geometric",
    "rdkit",
    "openmm",
    "gymnasium",
    "scanpy",
)


def member_versions() -> dict[str, str]:
    """Every installed `flowlab-*` distribution and its version."""
    found = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        if name and name.lower().startswith("flowlab-"):
            found[name.lower()] = dist.version
    return dict(sorted(found.items()))


def library_versions() -> dict[str, str]:
    """Python's version and that of each installed library of KEY_LIBRARIES (the missing ones left out)."""
    out = {"python": platform.python_version()}
    for lib in KEY_LIBRARIES:
        try:
            out[lib] = version(lib)
        except PackageNotFoundError:
            continue
    return out


def git_commit(cwd: Path | None = None) -> str | None:
    """The current git commit of the working tree (with '+dirty' when it has changes), or None outside git."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")
