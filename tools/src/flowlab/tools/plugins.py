"""Command groups contributed by packages through the `flowlab.commands` entry point group, loaded lazily.

A package registers `[project.entry-points."flowlab.commands"] rl = "flowlab.rl_control.cli:app"` (a typer app or a
click command); `flowlab --help` lists the group without importing its package, and only `flowlab rl ...` loads it.
The tools' own groups (`bench`, `cache`, `data`) load the same way, so `flowlab --help` imports no torch.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

import click
import typer
import typer.core

from flowlab.core.cli import input_error_line, input_errors

COMMANDS_GROUP = "flowlab.commands"
DEBUG_KEY = "flowlab.debug"

#: the tools' own groups: name -> (target, the one-line help `flowlab --help` shows without importing them)
BUILTIN_COMMANDS = {
    "bench": ("flowlab.tools.bench.command:app", "Benchmarks: every method against its baselines, in one run."),
    "cache": ("flowlab.tools.cache_cli:app", "The artifact cache: what the benchmarks built once and reuse."),
    "data": ("flowlab.tools.data_cli:app", "The shared data sets: list the catalogue, verify checksums."),
}


def command_entry_points() -> dict[str, EntryPoint]:
    """Every lazily loaded group: the tools' own, then those packages register (which cannot replace them)."""
    found = {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP)}
    builtin = {name: EntryPoint(name, target, COMMANDS_GROUP) for name, (target, _) in BUILTIN_COMMANDS.items()}
    return found | builtin


def load_command(ep: EntryPoint) -> click.Command:
    """Import entry point `ep` as a click command (a typer app converted and named after `ep`); TypeError when it is
    neither."""
    obj = ep.load()
    if isinstance(obj, typer.Typer):
        cmd = typer.main.get_command(obj)
        cmd.name = ep.name
        return cmd
    if isinstance(obj, click.Command):
        return obj
    raise TypeError(f"entry point {ep.name} = {ep.value} is neither a typer app nor a click command")


def _stub(ep: EntryPoint) -> click.Command:
    if ep.name in BUILTIN_COMMANDS and ep.value == BUILTIN_COMMANDS[ep.name][0]:
        return click.Command(ep.name, help=BUILTIN_COMMANDS[ep.name][1])
    dist = ep.dist.name if ep.dist is not None else ep.value.split(":")[0]
    return click.Command(ep.name, help=f"Commands from {dist} (flowlab {ep.name} --help).")


class LazyGroup(typer.core.TyperGroup):
    """The top-level group: built-in commands plus entry-point groups that are imported only when invoked; the error
    boundary of every command: an input error (`flowlab.core.cli.input_errors`) that a command lets through becomes
    one `error:` line and exit status 2, its traceback only with `flowlab --debug`."""

    def invoke(self, ctx: click.Context):
        """Runs the command; an input error it lets through becomes one `error:` line and exit status 2 (re-raised with
        `--debug`)."""
        try:
            return super().invoke(ctx)
        except input_errors() as err:
            if ctx.meta.get(DEBUG_KEY):
                raise
            click.echo(input_error_line(err), err=True)
            ctx.exit(2)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The built-in commands, then the other entry-point command groups by name."""
        builtin = super().list_commands(ctx)
        return builtin + sorted(set(command_entry_points()) - set(builtin))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """A built-in command, else a help-only stub of the entry-point group (not imported), else None."""
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            return cmd
        ep = command_entry_points().get(cmd_name)
        return _stub(ep) if ep is not None else None

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """Resolves the command, importing an entry-point group only now that it is invoked."""
        name = args[0] if args else None
        if name is not None and super().get_command(ctx, name) is None:
            ep = command_entry_points().get(name)
            if ep is not None:
                return name, load_command(ep), args[1:]
        return super().resolve_command(ctx, args)
