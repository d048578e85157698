"""What every command group shares at its options: the core's checks turned into typer's one-line errors (exit 2)
naming the option. Torch loads with the helpers' callers, not with this module."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    import torch

__all__ = ["claim_run_option", "device_option"]


def device_option(device: str, option: str = "--device") -> torch.device:
    """`check_device(device)`, a bad or absent device reported against `option`."""
    from flowlab.core.validation import check_device

    try:
        return check_device(device)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=option) from err


def claim_run_option(
    folder: str | os.PathLike[str], spec: Mapping[str, Any], *, overwrite: bool, option: str = "--out"
) -> Path:
    """`claim_run(folder, spec, overwrite=)` for a command's run-folder option: another run there is reported
    against `option` (with the hint to pass --overwrite)."""
    from flowlab.core.train.run_folder import claim_run

    try:
        return claim_run(folder, spec, overwrite=overwrite, name=option)
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix(f"{option}: "), param_hint=option) from err
