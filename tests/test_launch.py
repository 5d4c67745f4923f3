"""`idlegate.launch`: a what-if starts with its own few modules; every other command, and
the forecast group's help, with the whole command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from idlegate.launch import asks_what_if

PROBE = """
import json, sys
from idlegate.launch import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("idlegate"))))
"""


def launched(*args: str) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """The idlegate modules a launch of `args` imported, and the process."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    )
    return json.loads(run.stdout.splitlines()[-1]), run


@pytest.mark.parametrize(
    ("args", "asked"),
    [
        (["forecast", "etl.yaml"], True),
        (["forecast", "what-if", "etl.yaml"], True),
        (["forecast", "evaluate", "-w", "tpch"], False),
        (["forecast", "--help"], False),
        (["forecast"], False),
        (["simulate", "forecast"], False),
    ],
)
def test_which_commands_are_what_ifs(args: list[str], asked: bool):
    assert asks_what_if(args) is asked


def test_a_what_if_leaves_the_simulator_and_the_command_line_unloaded(tmp_path: Path):
    file = tmp_path / "etl.yaml"
    file.write_text("kind: DagWorkflow\nmetadata: {name: etl}\nspec: {stages: []}\n")
    modules, run = launched("forecast", str(file))
    assert (
        run.stderr.strip() == f"Error: {file}: spec: the workflow has no stages; add at least one"
    )
    assert "idlegate.cli" not in modules and "idlegate.sim.cluster" not in modules, modules
    assert "idlegate.cli_whatif" in modules


def test_the_forecast_groups_help_is_the_whole_command_lines():
    modules, run = launched("forecast", "--help")
    assert "idlegate.cli" in modules
    assert "evaluate" in run.stdout and "what-if" in run.stdout
