"""Where data lives: `$FLOWLAB_DATA` names the root of the shared data sets."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_VAR", "path", "root"]

ENV_VAR = "FLOWLAB_DATA"
_HINT = "set FLOWLAB_DATA to the folder holding the shared data sets (e.g. FLOWLAB_DATA=../shared/datasets)"


def root(*, required: bool = True) -> Path | None:
    """The data root from `$FLOWLAB_DATA`; raises FileNotFoundError when unset or absent (None if not required)."""
    value = os.environ.get(ENV_VAR)
    if not value:
        if required:
            raise FileNotFoundError(f"{ENV_VAR} is not set: {_HINT} - see the datasets README")
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        if required:
            raise FileNotFoundError(f"{ENV_VAR}={value} is not a folder: {_HINT}")
        return None
    return folder.resolve()


def path(name: str, file: str, *, data_root: Path | str | None = None) -> Path:
    """Path of `<root>/<name>/<file>`; FileNotFoundError naming the data set, the file and how to provide it."""
    base = Path(data_root) if data_root is not None else root()
    full = Path(base, name, file)
    if not full.is_file():
        raise FileNotFoundError(
            f"{name} data set not found: {full} ({ENV_VAR}={os.environ.get(ENV_VAR, '<unset>')}) - {_HINT}; "
            "see the datasets README"
        )
    return full
