"""deploy/README.md's operator flag table against the operator's own argument parser: every
flag `idlegate operator` declares has its row, every flag a row names is one it declares,
and a default a row shows (``--api-timeout 30``) is the flag's default (issue 80: some
twenty flags were missing, so the table could not be trusted to be whole)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main

from idlegate.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> dict[str, Any]:
    """Every name (``--x``, ``--no-x``, ``-n``) of the operator's options, with its option
    (typer's click parameter)."""
    command: Any = typer.main.get_command(app)
    names = {}
    for param in command.commands["operator"].params:
        for name in [*param.opts, *getattr(param, "secondary_opts", [])]:
            names[name] = param
    return names


def _table() -> list[str]:
    """The flag cells (first column) of the table under "The operator contract"."""
    text = (ROOT / "deploy" / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## The operator contract") :]
    lines = section[section.index("| flag | meaning |") :].splitlines()[2:]
    return [line.split(" | ")[0].lstrip("| ") for line in lines[: lines.index("")]]


def _named(cell: str) -> list[tuple[str, str | None]]:
    """Each flag a cell names (in backticks), with the value shown after it, if any."""
    found = re.findall(r"`(-{1,2}[a-z][-a-z]*)(?: ([^`]+))?`", cell)
    return [(flag, value or None) for flag, value in found]


def test_every_flag_of_the_operator_has_a_row_and_every_row_a_real_flag() -> None:
    declared = _declared()
    cells = _table()
    named = {flag for cell in cells for flag, _ in _named(cell)}
    assert len(cells) >= 30 and all(_named(cell) for cell in cells), cells
    missing = sorted(set(declared) - named - {"--help"})
    assert not missing, f"deploy/README.md's operator flag table lacks {missing}"
    unknown = sorted(named - set(declared))
    assert not unknown, f"deploy/README.md's operator flag table names no flag {unknown}"


def test_a_default_the_table_shows_is_the_flags_default() -> None:
    # (a value in capitals is a placeholder: `--queues FILE`)
    declared = _declared()
    shown = [(f, v) for cell in _table() for f, v in _named(cell) if v and not v.isupper()]
    assert len(shown) >= 25, shown
    for flag, value in shown:
        default = declared[flag].default
        number = isinstance(default, int | float) and not isinstance(default, bool)
        same = float(default) == float(value) if number else str(default) == value
        assert same, f"{flag}: the table says {value}, its default is {default!r}"
