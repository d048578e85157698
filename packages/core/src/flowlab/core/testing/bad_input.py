"""The bad-input kit: every entry point meets the same kinds of bad input, and each must answer with one clear error
that names the argument or file, exit status 2, before any work: never a traceback, never a silent acceptance, never
the advice to load unsafely (`weights_only=False`, numpy's `allow_pickle=`), and never running a pickle's code.

    cases = [BadInput("empty_file", ["evaluate", str(files["empty"])], ["rollout"]), ...]
    check_bad_inputs(app, cases)

A package's test lists its cases per command, `bad_files` makes the files, and `check_bad_inputs` runs them all and
reports every failure at once. An input error that a command lets through counts as clean when it is one the
`flowlab` command's boundary turns into its `error:` line (`flowlab.core.cli.input_errors`), as it would be there.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowlab.core.cli import input_error_line, input_errors

__all__ = ["KINDS", "BadInput", "bad_files", "check_bad_inputs", "uncovered_commands"]

#: the kinds of bad input every entry point is tried with (where it takes such an input)
KINDS = {
    "missing_file": "a path that does not exist",
    "empty_file": "an empty file",
    "corrupt_file": "a truncated or garbage file",
    "pickle": "a pickle that would run code when loaded",
    "wrong_content": "a readable file holding something else (another format, wrong columns or keys)",
    "nan": "NaN or infinite values",
    "shape": "values of the wrong shape or dimension",
    "type": "an option of the wrong type",
    "range": "a number out of range (zero, negative, above a bound)",
    "choice": "a name that is not one of the choices",
    "mixing": "an output folder that holds another run",
}
#: what an error must never advise: loading a FlowLab file unsafely (torch's or numpy's pickles) is never the fix
UNSAFE_ADVICE = ("weights_only=False", "allow_pickle=", "pickle.load()")


@dataclass(frozen=True)
class BadInput:
    """One bad invocation: `args` after the group's name; `names`: what the error must name (the option, the
    argument or the file, as it appears in the output)."""

    kind: str
    args: Sequence[str]
    names: Sequence[str]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {sorted(KINDS)}, got {self.kind!r}")
        if not self.names:
            raise ValueError("names: an error must name the argument or file it is about")


class _Marker:
    """Unpickling this touches a file: the proof that a loader ran a pickle's code."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def bad_files(
    folder: str | os.PathLike[str], suffix: str, like: str | os.PathLike[str] | None = None
) -> dict[str, Path]:
    """Bad files named `*{suffix}` in `folder`: `missing` (never written), `empty`, `garbage` (random bytes),
    `pickle` (a pickle whose loading would create `folder/PICKLE_RAN`) and, given a good file `like`, `truncated`
    (its first half)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {name: folder / f"{name}{suffix}" for name in ("missing", "empty", "garbage", "pickle")}
    files["empty"].write_bytes(b"")
    files["garbage"].write_bytes(bytes(range(256)) * 4)
    files["pickle"].write_bytes(pickle.dumps({"model": _Marker(folder / "PICKLE_RAN")}))
    if like is not None:
        data = Path(like).read_bytes()
        files["truncated"] = folder / f"truncated{suffix}"
        files["truncated"].write_bytes(data[: len(data) // 2])
    return files


def _outcome(app: Any, args: Sequence[str]) -> tuple[int, str, str | None]:
    """(exit code, output, what went wrong if it was not an error) of `app args`, with the `flowlab` command's
    boundary applied to an input error the command let through."""
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, list(args))
    exc = res.exception
    if exc is None or isinstance(exc, SystemExit):
        return res.exit_code, res.output, None
    if isinstance(exc, input_errors()):
        return 2, res.output + input_error_line(exc), None
    return 1, res.output, f"traceback: {type(exc).__name__}: {exc}"


def check_bad_inputs(app: Any, cases: Iterable[BadInput], pickle_marker: str | os.PathLike[str] | None = None) -> None:
    """Run every case through the typer/click `app` and assert in one report that each exits 2 with an error naming
    its `names`, with no traceback and no unsafe advice; `pickle_marker` (the `PICKLE_RAN` path of `bad_files`)
    must still not exist afterwards."""
    problems = []
    cases = list(cases)
    if not cases:
        raise ValueError("cases: no bad inputs given")
    for case in cases:
        code, output, crash = _outcome(app, case.args)
        where = f"[{case.kind}] {' '.join(case.args)}"
        if crash is not None:
            problems.append(f"{where}: {crash}")
        elif code == 0:
            problems.append(f"{where}: accepted silently (exit 0)")
        elif code != 2:
            problems.append(f"{where}: exit {code}, expected 2: {output.strip()[-300:]}")
        elif "Traceback" in output:
            problems.append(f"{where}: prints a traceback")
        else:
            flat = " ".join(output.split())
            missing = [name for name in case.names if name not in flat]
            if missing:
                problems.append(f"{where}: the error does not name {missing}: {flat[-300:]}")
        problems += [f"{where}: advises {advice}" for advice in UNSAFE_ADVICE if advice in output]
    if pickle_marker is not None and Path(pickle_marker).exists():
        problems.append(f"a pickle's code ran ({pickle_marker} was created)")
    assert not problems, f"{len(problems)} problems in {len(cases)} bad inputs:\n" + "\n".join(problems)


def uncovered_commands(app: Any, cases: Iterable[BadInput], kinds: Mapping[str, Iterable[str]] = ()) -> list[str]:
    """The commands of `app` (as `name` or `sub name`) that no case exercises, and those missing a kind that
    `kinds[command]` requires."""
    import typer

    def walk(cmd: Any, path: tuple[str, ...]) -> Iterable[str]:
        if hasattr(cmd, "list_commands"):
            ctx = cmd.context_class(cmd)
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), (*path, name))
        else:
            yield " ".join(path)

    root = typer.main.get_command(app) if isinstance(app, typer.Typer) else app
    covered: dict[str, set[str]] = {}
    commands = sorted(walk(root, ()))
    for case in cases:
        for command in commands:
            if list(case.args[: len(command.split())]) == command.split():
                covered.setdefault(command, set()).add(case.kind)
    missing = [c for c in commands if c not in covered]
    missing += [f"{c} ({k})" for c, ks in dict(kinds).items() for k in ks if k not in covered.get(c, set())]
    return missing
