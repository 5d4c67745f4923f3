"""``idlegate forecast FILE``: if I submit this DagWorkflow now, when does it start and
finish? Asks the operator's what-if endpoint (`idlegate.operator.edge.visibility_http`), which
forks its pool's live state, adds the workflow as its placement would, and replays it
(docs/forecast.md, "What if"). Nothing is created.

``idlegate forecast FILE`` is ``idlegate forecast what-if FILE``: a first argument that is
no command of the group is taken as the file (:class:`FileOrCommand`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from idlegate.api.forecast_ask import WHAT_IF_PATH, read_what_if, sureness
from idlegate.api.forecast_status import Forecast, describe, parse_forecast
from idlegate.api.operator_http import ask_operator, check_url
from idlegate.errors import IdlegateError
from idlegate.textfiles import read_stdin, read_text

DEFAULT_URL = "http://localhost:9090"


HELP = frozenset({"--help", "-h"})


class FileOrCommand(TyperGroup):
    """A group whose first argument, when it names none of its commands, is what-if's FILE;
    an option first is what-if's too (the group has none but help): ``forecast --json
    FILE`` as ``forecast FILE --json``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # (typer's own click's)
        if args and args[0] not in self.commands and args[0] not in HELP:
            args = ["what-if", *args]
        return super().parse_args(ctx, args)


def ask(url: str, text: str) -> dict[str, Any]:
    """POST `text` (a DagWorkflow) to the operator at `url`; its answer, or IdlegateError
    (a bad `url` quoted as given, before the endpoint's path is added)."""
    check_url(url)
    # (a replay of the pool's state may take a while on a long queue: a minute's patience)
    return ask_operator(url.rstrip("/") + WHAT_IF_PATH, text.encode(), timeout=60)


def register(group: typer.Typer) -> None:
    """Add ``what-if`` to the ``forecast`` group, and let ``forecast FILE`` mean it."""
    group.info.cls = FileOrCommand

    @group.command("what-if")
    def what_if(
        file: Annotated[
            Path,
            typer.Argument(
                metavar="FILE",
                help="A DagWorkflow YAML (as for kubectl apply), or - for standard input.",
            ),
        ],
        url: Annotated[
            str, typer.Option("--url", help="The operator's metrics port (port-forwarded).")
        ] = DEFAULT_URL,
        as_json: Annotated[bool, typer.Option("--json", help="The answer as JSON.")] = False,
    ) -> None:
        """When FILE would start and finish if submitted now.

        Asks the operator at --url: the live pool's forecast of FILE, with 80 % intervals,
        and how often the pool's intervals held. Nothing is created. idlegate forecast FILE
        is short for this."""
        try:
            named = "standard input" if str(file) == "-" else str(file)
            if str(file) == "-":  # (as lint reads it)
                text = read_stdin(sys.stdin, named)
            else:
                text = read_text(
                    file, "workflow file", "give a DagWorkflow YAML (as for kubectl apply)"
                )
            try:  # (what the operator would refuse, said before asking it)
                read_what_if(text)
            except IdlegateError as exc:
                from idlegate.documents import YamlRefusal  # (read_what_if's: loaded)

                if isinstance(exc, YamlRefusal):  # (its place: FILE line 13, column 7: ...)
                    raise IdlegateError(exc.at(named)) from None
                raise IdlegateError(f"{named}: {exc}") from None
            doc = ask(url, text)
            forecast = parse_forecast(doc)
        except IdlegateError as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            typer.echo(json.dumps(doc, indent=2))
            return
        where = f"pool {doc.get('pool')}" + (f", queue {doc['queue']}" if doc.get("queue") else "")
        typer.echo(f"{file.name} ({where}): {describe(forecast, time.time())}")
        if isinstance(forecast, Forecast) and "replays" in doc:  # (an older operator: none)
            typer.echo(sureness(int(doc["replays"]), doc.get("held")))


def run_alone(args: list[str]) -> None:
    """``idlegate forecast ARGS`` for a what-if, with this module's imports alone
    (`idlegate.launch`): the forecast group holding what-if, as `idlegate.cli` holds it."""
    group = typer.Typer(rich_markup_mode=None, add_completion=False)
    group.callback()(lambda: None)  # (a group, as in the whole command line: not one command)
    register(group)
    group(args=args, prog_name="idlegate forecast")
