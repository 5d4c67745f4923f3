"""The README stays a user's document: short, in order, true to the CLI and the demo.

Fast checks only (no command is run): the length, the order of the sections, the two
front-door commands first, no commit hashes or remarks about the machine's load in the
README and the docs it points to, every `idlegate COMMAND` a real command, every local
link and image present, and the results table shaped as `make demo` prints it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer.main

from idlegate import cli
from idlegate.evaluation.compare_report import table_headers

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 220
SECTIONS = (
    "Two commands",
    "Concepts",
    "The command line",
    "Training on your own workload",
    "Kubernetes quick start",
    "Results",
)
"""The README's `##` sections, in this order (more may follow them)."""
RECORD_DOCS = ("docs/architecture.md", "docs/policy.md", "docs/results.md")
"""The docs moved out of the README; the same hygiene applies to them."""
TABLE_BEGIN, TABLE_END = "<!-- BEGIN make demo table -->", "<!-- END make demo table -->"

# 7-40 hex digits with at least one letter a-f and one digit: a commit hash, not a year
# or an epoch time (all digits) nor a word (few words are hex, none has a digit)
HASH = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])")
MACHINE_STATE = re.compile(
    r"at commit|\(commit |sharing the \d+ cores|quiet machine|another training run|"
    r"partly shared|shared cores|busy machine",
    re.IGNORECASE,
)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _sections(text: str) -> list[str]:
    return [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]


def _command_names() -> set[str]:
    group = typer.main.get_command(cli.app)
    return set(group.commands)  # type: ignore[attr-defined]


def test_readme_is_short() -> None:
    lines = _text(README).count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it under {MAX_LINES}"


def test_sections_come_in_the_users_order() -> None:
    found = [s for s in _sections(_text(README)) if s in SECTIONS]
    assert found == list(SECTIONS)


def test_the_two_commands_come_first() -> None:
    text = _text(README)
    first_block = re.search(r"```\w*\n(.*?)```", text, re.DOTALL)
    assert first_block is not None
    assert "make demo" in first_block.group(1) and "make test" in first_block.group(1)
    assert _sections(text)[0] == "Two commands"
    assert text.index("make demo") < text.index("idlegate simulate")


@pytest.mark.parametrize(
    "name", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
)
def test_no_commit_hashes_or_machine_state(name: str) -> None:
    text = _text(ROOT / name)
    assert not HASH.findall(text), f"{name} names commit-like tokens: {HASH.findall(text)}"
    assert not MACHINE_STATE.findall(text), f"{name}: {MACHINE_STATE.findall(text)}"


def test_hash_pattern_tells_hashes_from_numbers() -> None:
    assert HASH.findall("at 7344df2 and (975874a)") == ["7344df2", "975874a"]
    assert not HASH.findall("submitTime 1717225200, years 2019, word facade, v0.26.0")


def _code(text: str) -> str:
    """The README's fenced code blocks and inline code spans (where commands are written)."""
    blocks = re.findall(r"```.*?```", text, re.DOTALL)
    rest = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return "\n".join(blocks + re.findall(r"`[^`\n]+`", rest))


def test_every_idlegate_command_in_the_readme_exists() -> None:
    used = set(re.findall(r"\bidlegate ([a-z][a-z-]*)", _code(_text(README))))
    assert {"simulate", "compare", "evaluate", "train", "export-onnx", "lint", "operator"} <= used
    unknown = used - _command_names()
    assert not unknown, f"README uses idlegate commands that do not exist: {sorted(unknown)}"


@pytest.mark.parametrize("name", ["README.md", *RECORD_DOCS])
def test_local_links_and_images_exist(name: str) -> None:
    path = ROOT / name
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _text(path))
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    missing = [t for t in local if not (path.parent / t).exists()]
    assert not missing, f"{name} links to missing files: {missing}"


def test_results_table_is_the_demo_table() -> None:
    text = _text(README)
    assert text.count(TABLE_BEGIN) == 1 and text.count(TABLE_END) == 1
    table = text.split(TABLE_BEGIN)[1].split(TABLE_END)[0].strip().splitlines()
    cells = [[c.strip().strip("*") for c in line.strip("|").split("|")] for line in table]
    demo = SimpleNamespace(rigid=False, config=SimpleNamespace(baseline_name="fair"))
    assert cells[0] == table_headers(demo)  # type: ignore[arg-type]
    labels = [spec.split("=", 1)[0] for spec in cli.DEMO_SCHEDULERS]
    assert [row[0] for row in cells[2:]] == labels


def test_the_pictures_schedules_are_what_the_caption_says() -> None:
    # docs/img/idle-slot.png is drawn from these two runs (benchmarks/gantt.py)
    spec = importlib.util.spec_from_file_location("gantt", ROOT / "benchmarks" / "gantt.py")
    assert spec is not None and spec.loader is not None
    gantt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gantt)
    at_once = gantt.run(gantt.make_scheduler("sjf-cp"))
    idled = gantt.run(gantt.IdleFirst(gantt.make_scheduler("sjf-cp"), "A", 2.0))
    assert {r.name: r.jct for r in at_once.records} == {"A": 20.0, "B": 22.0}
    assert {r.name: r.jct for r in idled.records} == {"A": 26.0, "B": 4.0}
    assert (ROOT / "docs" / "img" / "idle-slot.png").stat().st_size > 0
