"""The benchmark scripts speak to a user as `idlegate` does: ``--help`` gives the
docstring's whole first sentence and each option's default, and a user's mistake is one
line ``Error: ...`` with exit code 1, not a traceback (issue 82's trial)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from idlegate.flags import description
from tests.helpers import load_benchmark

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
queues = load_benchmark("queues")
late_starts = load_benchmark("late_starts")


def test_description_is_the_docstrings_first_paragraph_on_one_line() -> None:
    doc = "A first sentence that wraps\n  onto a second line.\n\nDetails.\n"
    assert description(doc) == "A first sentence that wraps onto a second line."
    assert description("By CP-\n    SAT, on held-\nout seeds.") == "By CP-SAT, on held-out seeds."
    assert description(None) == ""


def test_no_benchmark_cuts_its_description_at_the_first_line() -> None:
    cut = re.compile(r"description=\w*doc\w*\.(splitlines\(\)|split\(\"\\n\"\))\[0\]")
    found = [p.name for p in sorted(BENCHMARKS.glob("*.py")) if cut.search(p.read_text())]
    assert found == []


@pytest.mark.parametrize("module", [queues, late_starts], ids=["queues", "late_starts"])
def test_every_option_has_a_help_with_its_default(module: object) -> None:
    parser: argparse.ArgumentParser = module.parser()  # type: ignore[attr-defined]
    assert parser.description is not None and parser.description.endswith(").")
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, action.option_strings
        if not isinstance(action, argparse._StoreTrueAction):
            assert "default" in action.help, action.option_strings


@pytest.mark.parametrize(
    ("module", "argv", "said"),
    [
        (late_starts, ["--seeds", "1", "--bound", "0", "--jobs", "4"], "wait_bound"),
        (queues, ["--seeds", "1", "--jobs", "4", "--scenarios", "larg"], "no scenario 'larg'"),
        (queues, ["--seeds", "1", "--jobs", "4", "--bound", "0"], "wait_bound"),
        (queues, ["--seeds", "1", "--rows", "nope"], "no row's label"),
    ],
)
def test_a_users_mistake_is_one_error_line_and_exit_1(
    module: object, argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        module.main(argv)  # type: ignore[attr-defined]
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and said in err
    assert len(err.strip().splitlines()) == 1, err
