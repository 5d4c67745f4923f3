"""What the README and the docs tell a user to run or open exists: the two front-door
commands are Makefile targets, every ``idlegate COMMAND --flag`` written in a code block or
span is a command taking that flag, and every local link and image resolves."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.core
import typer.main

from idlegate import cli

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    "README.md",
    "deploy/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
]


def _code(text: str) -> str:
    """The fenced code blocks and inline code spans (where commands are written), with
    backslash continuations joined."""
    blocks = re.findall(r"```.*?```", text, re.DOTALL)
    rest = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return "\n".join(blocks + re.findall(r"`[^`\n]+`", rest)).replace("\\\n", " ")


def _invocations(text: str) -> Iterator[tuple[str, str, list[str]]]:
    """(command, the word after it, its --flags) of every ``idlegate COMMAND ...`` up to the
    line's end or a pipe (the word names the command of a group, e.g. ``history export``)."""
    for match in re.finditer(r"\bidlegate ([a-z][a-z-]*)([^\n`|;&]*)", _code(text)):
        word = match[2].split()[0] if match[2].split() else ""
        yield match[1], word, re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", match[2])


def test_the_two_commands_are_makefile_targets() -> None:
    first_block = re.search(r"```\w*\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert first_block is not None
    commands = {line.split("#")[0].strip() for line in first_block[1].splitlines()}
    assert {"make demo", "make test"} <= commands
    targets = re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert {"demo", "test"} <= set(targets)


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_idlegate_command_and_flag_written_exists(name: str) -> None:
    commands = typer.main.get_command(cli.app).commands  # type: ignore[attr-defined]
    wrong = []
    for command, word, flags in _invocations((ROOT / name).read_text()):
        if command not in commands:
            wrong.append(f"idlegate {command}")
            continue
        found = commands[command]
        if isinstance(found, typer.core.TyperGroup):  # a sub-app: the next word is its command
            if word not in found.commands:
                wrong.append(f"idlegate {command} {word}")
                continue
            found = found.commands[word]
        params = found.params
        known = {"--help", *(o for p in params for o in (*p.opts, *p.secondary_opts))}
        wrong += [f"idlegate {command} {flag}" for flag in flags if flag not in known]
    assert not wrong, f"{name} tells the user to run what does not exist: {sorted(set(wrong))}"


@pytest.mark.parametrize("name", DOCUMENTS)
def test_local_links_and_images_exist(name: str) -> None:
    path = ROOT / name
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    missing = [t for t in local if not (path.parent / t).exists()]
    assert not missing, f"{name} links to missing files: {missing}"
