"""The command line starts light (issue 93, item 7): ``idlegate --help`` and the light
commands import no command's heavy modules, and the help lists the lazy commands as they
are. The CPU they cost is measured by benchmarks/cli_start.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.testing
from typer.core import TyperCommand

from idlegate import cli
from idlegate.cli_lazy import load_commands

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "onnxruntime", "numpy", "networkx", "idlegate.evaluation", "idlegate.sim.cluster")
"""What a light command must not import (the ML stacks, the simulator, the evaluation)."""
PROBE = (
    "import json, sys\n"
    "from idlegate.launch import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


def imported_by(*args: str) -> set[str]:
    """The modules loaded once ``idlegate ARGS`` ran, in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, check=False
    )
    return set(json.loads(done.stderr.splitlines()[-1]))


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("version",),
        ("lint", "--help"),
        ("visibility", "--help"),
        ("visibility", "--url", "http://127.0.0.1:9"),  # (refused: nothing listens there)
        ("dashboard", "--help"),
        ("lint", str(ROOT / "deploy" / "samples" / "diamond.yaml")),
        ("lint", str(ROOT / "deploy" / "samples" / "tpch-q3.yaml")),
    ],
)
def test_light_commands_import_no_heavy_module(args: tuple[str, ...]) -> None:
    loaded = imported_by(*args)
    assert [m for m in HEAVY if m in loaded] == []


def test_a_heavy_command_is_loaded_when_asked_for() -> None:
    assert "idlegate.evaluation" in imported_by("simulate", "--help")


def test_the_help_lists_each_lazy_command_as_its_own_help_says() -> None:
    shown = {n: TyperCommand(n, help=lazy.summary) for n, lazy in cli.Commands.LAZY.items()}
    for module in {lazy.module for lazy in cli.Commands.LAZY.values()}:
        for name, command in load_commands(module).items():
            for limit in (40, 60, 200):
                assert shown[name].get_short_help_str(limit) == command.get_short_help_str(limit)
    loaded = {n for lazy in cli.Commands.LAZY.values() for n in load_commands(lazy.module)}
    assert loaded == set(cli.Commands.LAZY)  # (each module's commands, all listed)


def test_help_is_the_same_before_and_after_the_commands_load() -> None:
    runner = typer.testing.CliRunner()
    before = runner.invoke(cli.app, ["--help"], env={"COLUMNS": "100"}).output
    cli.commands()  # (loads every lazy command into the group)
    assert runner.invoke(cli.app, ["--help"], env={"COLUMNS": "100"}).output == before
    assert "forecast" in before and "simulate" in before


def test_the_cycle_found_without_networkx_is_the_one_networkx_finds() -> None:
    # (a workflow's cycle is said from `graphs.find_cycle`, so lint starts without networkx)
    import random

    import networkx as nx

    from idlegate.sim.graphs import cycle_path

    rng = random.Random(0)
    cyclic = 0
    for _ in range(3000):
        names = [f"s{i}" for i in rng.sample(range(20), rng.randint(1, 7))]
        graph = nx.DiGraph()
        graph.add_nodes_from(names)
        graph.add_edges_from((u, v) for u in names for v in names if u != v and rng.random() < 0.3)
        try:
            edges = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            assert cycle_path(graph) is None
            continue
        cyclic += 1
        assert cycle_path(graph) == " -> ".join([e[0] for e in edges] + [edges[0][0]])
    assert cyclic > 1000
