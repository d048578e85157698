"""Trained models on disk without pickles: weights as safetensors, settings in a `config.json` with a format tag
and a version. A method's store names its files and parses its own configs; these check the rest and raise one
ValueError that names the argument (`name`) and the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

__all__ = ["load_weights", "read_config", "save_weights"]


def save_weights(module: torch.nn.Module, path: str | os.PathLike[str]) -> None:
    """Write `module`'s state dict (detached, contiguous, on the CPU) to the safetensors file `path`."""
    save_file({k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}, Path(path))


def load_weights(module: torch.nn.Module, path: str | os.PathLike[str], name: str) -> None:
    """Load the safetensors file `path` into `module`; ValueError naming `name` when the file is not this module's
    weights (unreadable, missing or extra keys, other shapes) or holds NaN or infinite values."""
    path = Path(path)
    try:
        state = load_file(path)
        module.load_state_dict(state)
    except Exception as err:  # safetensors' own errors and state-dict mismatches
        raise ValueError(f"{name}: {path} does not hold this model's weights ({type(err).__name__})") from err
    if not all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point()):
        raise ValueError(f"{name}: {path} holds NaN or infinite weights")


def read_config(
    folder: str | os.PathLike[str],
    *,
    format: str,
    version: int,
    files: tuple[str, ...],
    what: str,
    command: str,
    name: str,
) -> dict:
    """The parsed `config.json` of a saved model `folder` (a `what`, written by `command`): ValueError naming `name`
    when the folder is missing, lacks config.json or one of `files`, or its config is not JSON of this `format` and
    `version`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"{name}: {folder} is not a folder written by `{command}`")
    for file in ("config.json", *files):
        if not (folder / file).is_file():
            raise ValueError(f"{name}: {folder} is not a saved {what} (no {file})")
    try:
        meta = json.loads((folder / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{name}: {folder / 'config.json'} is not a {what} config ({err})") from err
    if not isinstance(meta, dict) or meta.get("format") != format or meta.get("version") != version:
        raise ValueError(f"{name}: {folder / 'config.json'} is not a {what} config (expected format {format!r} "
                         f"version {version})")  # fmt: skip
    return meta
