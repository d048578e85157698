"""The catalogue of FlowLab's shared data sets: name, files with SHA-256, licence, citation and origin."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

__all__ = ["Dataset", "FileCheck", "catalogue", "check", "dataset"]


@dataclass(frozen=True)
class Dataset:
    """One catalogued data set: its name, a one-line description, licence, citation, origin, and its files
    (path relative to the data set's folder -> SHA-256)."""

    name: str
    description: str
    licence: str
    citation: str
    origin: str
    files: dict[str, str]  # relative path -> sha256


@dataclass(frozen=True)
class FileCheck:
    """The check of one file: the data set and the file (relative path), where it was looked for, and its
    status: "ok", "missing" or "mismatch" (the SHA-256 differs)."""

    dataset: str
    file: str
    path: Path
    status: str  # "ok" | "missing" | "mismatch"


@cache
def catalogue() -> dict[str, Dataset]:
    """Every catalogued data set by name (sorted), read once from the packaged catalogue.json."""
    raw = json.loads(resources.files("flowlab.datasets").joinpath("catalogue.json").read_text())
    return {name: Dataset(name=name, **entry) for name, entry in sorted(raw.items())}


def dataset(name: str) -> Dataset:
    """The catalogue entry of data set `name`; a ValueError naming the known ones when there is none."""
    cat = catalogue()
    if name not in cat:
        raise ValueError(f"name: unknown data set {name!r}; known: {', '.join(cat)}")
    return cat[name]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check(name: str, data_root: Path) -> list[FileCheck]:
    """Verify every catalogued file of data set `name` under `data_root` against its SHA-256."""
    entry = dataset(name)
    results = []
    for rel, digest in sorted(entry.files.items()):
        path = Path(data_root, name, rel)
        if not path.is_file():
            status = "missing"
        else:
            status = "ok" if _sha256(path) == digest else "mismatch"
        results.append(FileCheck(name, rel, path, status))
    return results
