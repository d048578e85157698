"""Artifacts: what several runs or methods reuse (trained teachers, autoencoders, generated data sets), built once
and kept in a content-addressed cache under `$FLOWLAB_CACHE` (default `~/.cache/flowlab`).

    DENOISER = Artifact("vision.digits_denoiser", build=train_denoiser, config=DenoiserSettings(steps=1500))
    entry = ensure(DENOISER)                  # builds on the first call; afterwards checks and reuses
    state = torch.load(entry.path / "weights.pt", weights_only=True)

`build(config, folder)` writes the artifact's files into an empty folder. The cache key is the SHA-256 of the name,
the builder (module and qualified name), the config (`to_dict()`), the SHA-256 of every input file, the format
`version`, the torch version and the build's thread count: change any of them and the artifact is built anew beside
the old entry. Every build runs on the artifact's fixed number of intra-op torch threads (`threads`, by default
`BUILD_THREADS`, one), wherever it runs: a CPU build's floating-point sums depend on how torch splits them over
threads, so a fixed count makes an entry's bytes a function of its key (on one kind of CPU), not of the core count of
the machine or process that happened to build it first. One-thread builds let the runner build several artifacts side
by side, one per core; an artifact that declares more threads is built alone. A build writes into a temporary folder
and renames it into place with its manifest (build time and seconds, versions, config, seed, every file's SHA-256),
so a reader sees a whole entry or none. Every load checks the files against the manifest: a corrupt entry is moved
aside with a warning and built again. A lock file serialises builds of one key, so two processes asking for the same
artifact build it once (the second waits, then reuses it). POSIX only (fcntl).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from flowlab.core.config import Config
from flowlab.core.threads import torch_threads

__all__ = [
    "BUILD_THREADS",
    "Artifact",
    "CacheEntry",
    "CorruptArtifactWarning",
    "cache_root",
    "clear",
    "ensure",
    "entries",
    "is_cached",
    "sha256_file",
    "sha256_tensor",
]

ENV_VAR = "FLOWLAB_CACHE"
MANIFEST = "manifest.json"
#: the intra-op torch threads of a build unless its artifact declares others (see the module docstring)
BUILD_THREADS = 1
_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")


class CorruptArtifactWarning(UserWarning):
    """A cached artifact failed its checksum (or lost a file) and is being rebuilt."""


def cache_root() -> Path:
    """`$FLOWLAB_CACHE`, default `~/.cache/flowlab`."""
    return Path(os.environ.get(ENV_VAR) or Path.home() / ".cache" / "flowlab").expanduser()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_tensor(x: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and values (on CPU, contiguous): a key for in-memory input data."""
    x = x.detach().cpu().contiguous()
    digest = hashlib.sha256(f"{x.dtype}{tuple(x.shape)}".encode())
    digest.update(x.view(torch.uint8).numpy().tobytes() if x.numel() else b"")
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact:
    """A named build product. `name`: dotted, `<pkg>.<what>` (e.g. "vision.digits_denoiser"); `build(config,
    folder)`: writes the files into `folder`; `config`: everything the build depends on (a `Config`, with its seed);
    `inputs`: data files whose contents enter the key; `version`: bump it when the files' format changes;
    `expected_seconds`: the cold build time on the 2-core CPU machine, for the runner's plan; `threads`: the intra-op
    torch threads the build runs on, whoever builds it (part of the key)."""

    name: str
    build: Callable[[Any, Path], None]
    config: Config
    inputs: Sequence[Path] = ()
    version: int = 1
    expected_seconds: float = 60.0
    threads: int = BUILD_THREADS
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                f"name: expected a dotted lower-case name like 'vision.digits_denoiser', got {self.name!r}"
            )
        if not callable(self.build):
            raise ValueError(f"build: expected a callable build(config, folder), got {type(self.build).__name__}")
        if not isinstance(self.config, Config):
            raise ValueError(f"config: expected a flowlab.core.config.Config, got {type(self.config).__name__}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"version: expected a positive int, got {self.version!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads: expected a positive int, got {self.threads!r}")

    def key(self) -> str:
        """The content address: 16 hex digits of the SHA-256 described in the module docstring."""
        return hashlib.sha256(json.dumps(self._identity(), sort_keys=True).encode()).hexdigest()[:16]

    def _identity(self) -> dict[str, Any]:
        missing = [str(p) for p in self.inputs if not Path(p).is_file()]
        if missing:
            raise FileNotFoundError(f"inputs: artifact {self.name} needs the file(s) {missing}")
        return {
            "name": self.name,
            "builder": f"{self.build.__module__}.{self.build.__qualname__}",
            "config": {"type": type(self.config).__qualname__, **self.config.to_dict()},
            "inputs": {Path(p).name: sha256_file(p) for p in self.inputs},
            "version": self.version,
            "torch": torch.__version__,
            "threads": self.threads,
        }


@dataclass(frozen=True)
class CacheEntry:
    """Where an artifact lives, whether this call built it (and in how many seconds), and its manifest."""

    path: Path
    built: bool
    seconds: float
    manifest: dict[str, Any]


def _folder(artifact: Artifact, root: Path | None) -> Path:
    return (root or cache_root()) / "artifacts" / artifact.name / artifact.key()


def _problem(folder: Path) -> str | None:
    """None when `folder` holds a whole entry whose files match their manifest checksums, else what is wrong."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return "no readable manifest"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "the manifest lists no files"
    for rel, digest in files.items():
        path = folder / rel
        if not path.is_file():
            return f"{rel} is missing"
        if sha256_file(path) != digest:
            return f"{rel} does not match its checksum"
    return None


def is_cached(artifact: Artifact, *, root: Path | None = None) -> bool:
    """Whether a whole entry exists for this key (its manifest is there; checksums are checked on `ensure`)."""
    return (_folder(artifact, root) / MANIFEST).is_file()


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure(artifact: Artifact, *, root: Path | None = None) -> CacheEntry:
    """The artifact's checked cache entry, built first if absent or corrupt (see the module docstring)."""
    folder = _folder(artifact, root)
    with _locked(folder.with_name(folder.name + ".lock")):
        if folder.exists():
            problem = _problem(folder)
            if problem is None:
                return CacheEntry(folder, False, 0.0, json.loads((folder / MANIFEST).read_text()))
            aside = folder.with_name(f"{folder.name}.corrupt-{uuid.uuid4().hex[:12]}")
            warnings.warn(
                f"artifact {artifact.name} ({folder}): {problem}; moved aside to {aside.name} and rebuilding",
                CorruptArtifactWarning,
                stacklevel=2,
            )
            folder.rename(aside)
        return _build(artifact, folder)


def _build(artifact: Artifact, folder: Path) -> CacheEntry:
    identity = artifact._identity()
    tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.tmp-", dir=folder.parent))
    try:
        start = time.perf_counter()
        with torch_threads(artifact.threads):
            artifact.build(artifact.config, tmp)
        seconds = time.perf_counter() - start
        files = {str(p.relative_to(tmp)): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        if not files:
            raise ValueError(f"build: artifact {artifact.name}'s builder wrote no file")
        manifest = {
            **identity,
            "key": folder.name,
            "seed": getattr(artifact.config, "seed", None),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "build_seconds": round(seconds, 3),
            "python": platform.python_version(),
            "files": files,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
        os.rename(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return CacheEntry(folder, True, seconds, manifest)


def entries(*, root: Path | None = None) -> list[dict[str, Any]]:
    """Every whole entry's manifest (with its `path` and `bytes`), sorted by name then creation time."""
    base = (root or cache_root()) / "artifacts"
    found = []
    for manifest in base.glob(f"*/*/{MANIFEST}"):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        folder = manifest.parent
        data.update(path=str(folder), bytes=sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()))
        found.append(data)
    return sorted(found, key=lambda d: (d.get("name", ""), d.get("created", "")))


def clear(*, root: Path | None = None, name: str | None = None) -> int:
    """Remove every cached artifact (or those of one `name`), with leftovers of failed builds; returns how many
    entries were removed."""
    base = (root or cache_root()) / "artifacts"
    if not base.is_dir():
        return 0
    folders = [base / name] if name is not None else [p for p in base.iterdir() if p.is_dir()]
    removed = 0
    for folder in folders:
        if folder.is_dir():
            removed += sum(1 for m in folder.glob(f"*/{MANIFEST}"))
            shutil.rmtree(folder)
    return removed
