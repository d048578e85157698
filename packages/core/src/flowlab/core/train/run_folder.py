"""Run folders that are never silently mixed: a folder belongs to one run, identified by a JSON spec (the command,
its config and a fingerprint of the data). `claim_run` writes the spec into a new folder's `run.json`; a rerun with
the same spec continues only when asked to resume, and a different run (or a folder with checkpoints but no spec) is
refused in one line naming the argument, unless asked to overwrite. A folder that holds nothing but its `run.json`
(a run that failed before writing anything) is free for any run."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

__all__ = ["RUN_FILE", "claim_run", "data_fingerprint"]

RUN_FILE = "run.json"


def data_fingerprint(*tensors: torch.Tensor) -> str:
    """SHA-256 over the shapes, dtypes and values of the tensors: equal exactly when the data are."""
    digest = hashlib.sha256()
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"tensors[{i}]: expected a tensor, got {type(t).__name__}")
        values = t.detach().cpu().contiguous()
        digest.update(f"{tuple(values.shape)}|{values.dtype}|".encode())
        digest.update(values.reshape(-1).view(torch.uint8).numpy().tobytes() if values.numel() else b"")
    return digest.hexdigest()


def _normal(spec: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(dict(spec), sort_keys=True))
    except (TypeError, ValueError) as err:
        raise ValueError(f"spec: expected JSON-ready values ({err})") from err


def _changed(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, old, new) of every leaf that differs, nested mappings followed down."""
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            found += _changed(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append((f"{prefix}{key}", a, b))
    return found


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} ({a!r} there, {b!r} now)" for k, a, b in _changed(old, new)[:4])


def claim_run(
    folder: str | os.PathLike[str],
    spec: Mapping[str, Any],
    *,
    overwrite: bool = False,
    resume: bool = False,
    name: str = "out",
) -> Path:
    """Make `folder` the home of the run described by `spec` and return it (created).

    A missing or empty folder, or one holding only a `run.json`, gets this run's `run.json` (a fresh run, the
    default). A folder holding this run's work (its `run.json` holds the same spec) is continued with resume=True
    and started again with overwrite=True; without either it is refused, so a rerun never continues or replaces
    work silently. Anything else raises ValueError naming `name`: another run (naming what differs; overwrite=True
    replaces it), or a non-empty folder without `run.json`, which is never deleted."""
    if overwrite and resume:
        raise ValueError(f"{name}: give --resume (continue the run) or --overwrite (start again), not both")
    folder = Path(folder)
    want = _normal(spec)
    record = folder / RUN_FILE
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{name}: {folder} is a file; expected a run folder")
    if record.is_file():
        try:
            have = json.loads(record.read_text())
        except json.JSONDecodeError:
            have = None
        worked = any(p.name != RUN_FILE for p in folder.iterdir())
        if worked and have != want and not overwrite:
            what = _differences(have, want) if isinstance(have, dict) else f"an unreadable {RUN_FILE}"
            raise ValueError(f"{name}: {folder} holds another run: {what}; pass --overwrite to replace it or "
                             "choose another folder")  # fmt: skip
        if worked and have == want and not (resume or overwrite):
            raise ValueError(f"{name}: {folder} holds this run already; pass --resume to continue it from its last "
                             "checkpoint, or --overwrite to start it again")  # fmt: skip
        if worked and overwrite:
            shutil.rmtree(folder)
    elif folder.is_dir() and any(folder.iterdir()):
        raise ValueError(f"{name}: {folder} is not empty and holds no {RUN_FILE} (not a FlowLab run, or one from "
                         "before runs were recorded); choose another folder or empty it")  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(want, indent=2, sort_keys=True))
    return folder
