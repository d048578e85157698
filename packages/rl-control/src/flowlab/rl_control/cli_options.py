"""What both `flowlab rl` command families check before any work, as typer errors (exit 2) naming the option: the
offline dataset behind --dataset (any format `load_dataset` reads) and its digest, and the JSON file of --out.
Heavy libraries load inside the functions."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from flowlab.core.cli import json_text

if TYPE_CHECKING:
    from flowlab.rl_control.data import OfflineDataset

__all__ = ["check_json_out", "dataset_digest", "read_dataset", "write_json"]


def read_dataset(path: Path, *, multi_agent: bool) -> OfflineDataset:
    """The offline dataset at `path` (--dataset), with an agent axis or without one as `multi_agent` says."""
    from flowlab.rl_control.data import load_dataset

    try:
        data = load_dataset(path)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err).removeprefix("path: "), param_hint="--dataset") from None
    if data.multi_agent != multi_agent:
        command = "`flowlab rl marl-collect`" if multi_agent else "`flowlab rl collect`"
        got = f"an agent axis of {data.n_agents} agents" if data.multi_agent else "no agent axis"
        want = "multi-agent" if multi_agent else "single-agent"
        raise typer.BadParameter(f"{path} holds {got}; expected {want} transitions from {command}",
                                 param_hint="--dataset")  # fmt: skip
    return data


def dataset_digest(path: Path) -> str:
    """SHA-256 of the dataset file's bytes, or of a dataset folder's files (their relative paths and bytes): what a
    run records of its --dataset."""
    digest = hashlib.sha256()
    if not path.is_dir():
        digest.update(path.read_bytes())
        return digest.hexdigest()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{file.relative_to(path).as_posix()}\0".encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def check_json_out(out: Path | None) -> None:
    """Refuse an --out that is a folder or whose extension is not .json (the extension decides the format)."""
    if out is not None and (out.is_dir() or out.suffix != ".json"):
        got = "a folder" if out.is_dir() else repr(out.name)
        raise typer.BadParameter(f"expected the path of a .json file, got {got}", param_hint="--out")


def write_json(out: Path, record: dict[str, Any]) -> None:
    """Write `record` to `out` as JSON (non-finite numbers as null beside a `<key>_reason`) and say so."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json_text(record, indent=2))
    typer.echo(f"wrote {out}")
