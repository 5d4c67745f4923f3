"""The command line's group that imports a command's module only when that command runs.

Every heavy command (the simulator's, the evaluation's, training's, the operator's) lives
in a module of its own with a module-level ``app`` (`idlegate.cli_run`, `cli_train`,
`cli_history`, `cli_forecast`). Importing them all cost about a second of CPU before
``idlegate --help``, ``lint`` or ``visibility`` did anything (issue 93, item 7); the group
lists them from `LAZY` without importing them, and imports one module when one of its
commands is asked for (click's "lazily loading subcommands").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup

Command = Any
"""A click command (typer's own click's, which it does not export)."""


@dataclass(frozen=True)
class Lazy:
    """A command imported when asked for."""

    module: str
    """The module whose ``app`` (a `typer.Typer`) holds the command."""
    summary: str
    """The first paragraph of its help, which ``idlegate --help`` shortens as click
    shortens the command's own (tests/test_cli_lazy.py checks they are the same)."""


def load_commands(module: str) -> dict[str, Command]:
    """The click commands of `module`'s ``app``, by name (their group's)."""
    app: typer.Typer = importlib.import_module(module).app
    return dict(typer.main.get_group(app).commands)


class LazyGroup(TyperGroup):
    """A typer group that adds the commands of `LAZY` (set by a subclass) on first use."""

    LAZY: ClassVar[Mapping[str, Lazy]] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        eager = [n for n in self.commands if n not in self.LAZY]
        return [*eager, *self.LAZY]

    def get_command(self, ctx: Any, cmd_name: str) -> Command | None:
        lazy = self.LAZY.get(cmd_name)
        if lazy is not None and cmd_name not in self.commands:
            for name, command in load_commands(lazy.module).items():
                self.commands.setdefault(name, command)
        return super().get_command(ctx, cmd_name)

    def every_command(self) -> dict[str, Command]:
        """Every command by name, each lazy one loaded (for checks of the whole command line)."""
        ctx = typer.Context(self)
        return {n: c for n in self.list_commands(ctx) if (c := self.get_command(ctx, n))}

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """click's list of commands, with a stand-in for each lazy one not loaded (its
        summary), so that ``--help`` imports nothing more."""
        shown: dict[str, Any] = {}
        for name in self.list_commands(ctx):
            lazy = self.LAZY.get(name)
            if name in self.commands or lazy is None:
                shown[name] = self.commands.get(name)
            else:
                shown[name] = TyperCommand(name, help=lazy.summary)
        stand_in = TyperGroup(commands={n: c for n, c in shown.items() if c is not None})
        stand_in.format_commands(ctx, formatter)  # (TyperGroup lists in `shown`'s order)
