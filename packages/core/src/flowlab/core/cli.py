"""What every command group shares: the core's checks turned into typer's one-line errors (exit 2) naming the
option (`option_error`: a method's "field: ..." error against the command's option of that name; files through
`load_weights_option`), the range of a `--seed` (`SEEDS`), JSON that is always valid (`json_text`), and what an
input error is (`input_errors`) and how it reads (`input_error_line`): the `flowlab` command's error boundary and the
bad-input test kit both use them. Torch loads with the helpers' callers, not with this module."""

from __future__ import annotations

import json
import math
import os
import pickle
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    import torch

__all__ = [
    "OVERWRITE_HELP",
    "RESUME_HELP",
    "SEEDS",
    "choice_option",
    "claim_run_option",
    "device_option",
    "input_error_line",
    "input_errors",
    "json_text",
    "load_weights_option",
    "option_error",
    "positive_ints_option",
]


def choice_option(value: str, choices: tuple[str, ...], option: str, what: str = "value") -> str:
    """`value` if it is one of `choices`, else a usage error against `option` naming the bad `what` and the choices."""
    if value not in choices:
        expected = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
        raise typer.BadParameter(f"unknown {what} {value!r}; expected {expected}", param_hint=option)
    return value


def device_option(device: str, option: str = "--device") -> torch.device:
    """`check_device(device)`, a bad or absent device reported against `option`."""
    from flowlab.core.validation import check_device

    try:
        return check_device(device)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=option) from err


def positive_ints_option(text: str, option: str) -> tuple[int, ...]:
    """The comma-separated positive ints of an option (network widths such as 128,128, NFEs such as 1,2,4); anything
    else is reported against `option`."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise typer.BadParameter(f"expected comma-separated positive ints like 1,2,4, got {text!r}", param_hint=option)
    return values


#: the help of every training command's two run-folder flags, the same in every group
RESUME_HELP = "Continue the run already in the output folder from its last checkpoint (same settings)."
OVERWRITE_HELP = "Delete the run already in the output folder and start again."


def claim_run_option(
    folder: str | os.PathLike[str],
    spec: Mapping[str, Any],
    *,
    overwrite: bool,
    resume: bool,
    option: str = "--out",
) -> Path:
    """`claim_run(folder, spec, overwrite=, resume=)` for a command's run-folder option (its `--overwrite` and
    `--resume` flags: `RESUME_HELP`, `OVERWRITE_HELP`): another run there, or this run's work without either flag,
    is reported against `option`."""
    from flowlab.core.train.run_folder import claim_run

    try:
        return claim_run(folder, spec, overwrite=overwrite, resume=resume, name=option)
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix(f"{option}: "), param_hint=option) from err


def load_weights_option(path: str | os.PathLike[str], option: str, *, map_location: Any = None) -> Any:
    """`load_weights(path)` (tensors only) for a file an option or argument names: a missing, empty, corrupt or
    unsafe file is reported against `option`."""
    from flowlab.core.train.checkpoint import load_weights

    try:
        return load_weights(path, map_location=map_location, name=option)
    except ValueError as err:
        raise typer.BadParameter(str(err).removeprefix(f"{option}: "), param_hint=option) from err


#: the range of a --seed: the seeds torch's generators take (`typer.Option(..., **SEEDS)`)
SEEDS = {"min": -(2**63), "max": 2**64 - 1}


def _hint(param: Any) -> str:
    return param.opts[0] if param.param_type_name == "option" else param.name.upper()


def option_error(
    err: Exception,
    options: Mapping[str, str] | None = None,
    *,
    ctx: typer.Context | None = None,
    default: str | None = None,
    where: str = "",
) -> typer.BadParameter:
    """A check's `name: what` error (a config's field, `Config.name` too, a function's argument, or several:
    `n, steps: ...`) as typer's error against the options that set those names; raise it `from err`.

    Each name is reported as `options[name]` if given, else, with the command's `ctx`, as the command's parameter of
    that name (its flag, or an argument's NAME), else as `--name` with dashes. A message that names nothing (or,
    with `ctx`, a name the command lacks) is reported against `default` (e.g. the file argument), or against no
    option. `where` (e.g. the file read) prefixes the message."""
    head, sep, _ = str(err).partition(": ")
    fields = [field.strip().rpartition(".")[2] for field in head.split(",")] if sep else []
    params = {p.name: p for p in ctx.command.params} if ctx is not None else None
    options = options or {}
    hints = []
    for field in fields:
        if field in options:
            hints.append(options[field])
        elif params is not None and field in params:
            hints.append(_hint(params[field]))
        elif params is None and field.isidentifier():
            hints.append("--" + field.replace("_", "-"))
        else:
            hints = []
            break
    message = f"{where}: {err}" if where else str(err)
    return typer.BadParameter(message, param_hint=" / ".join(hints) or default)


def input_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a command raises for bad input (never for a bug): ValueError, a missing file, a file that is
    not what it claims (a corrupt pickle or archive, an empty array file), and OpenMM's input errors when OpenMM
    is loaded."""
    errors: list[type[BaseException]] = [ValueError, FileNotFoundError, pickle.UnpicklingError, zipfile.BadZipFile,
                                         EOFError]  # fmt: skip
    openmm = sys.modules.get("openmm")
    if openmm is not None and hasattr(openmm, "OpenMMException"):
        errors.append(openmm.OpenMMException)
    return tuple(errors)


def input_error_line(err: BaseException) -> str:
    """The one line an input error becomes: its message's first line and its type."""
    message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return f"error: {message} ({type(err).__name__}; flowlab --debug shows where)"


def _finite(value: Any) -> Any:
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            out[key] = _finite(item)
            if isinstance(item, float) and not math.isfinite(item):
                out[f"{key}_reason"] = f"not finite ({item})"
        return out
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value: Any, indent: int | None = None) -> str:
    """`value` as JSON that every parser reads: a non-finite float (a metric with no sample to average, a diverged
    loss) becomes null, and in a mapping a `<key>_reason` beside it says what it was (`not finite (nan)`)."""
    return json.dumps(_finite(value), indent=indent, allow_nan=False)
