"""The benchmark scripts speak to a user as `idlegate` does: ``--help`` gives the
docstring's whole first sentence and each option's default, and a user's mistake is one
line ``Error: ...`` with exit code 1, not a traceback (issue 82's trial)."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from idlegate.flags import add_seeds, description, seed_range
from tests.helpers import benchmark_help, load_benchmark

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
queues = load_benchmark("queues")
late_starts = load_benchmark("late_starts")
twins = load_benchmark("twins")
hindsight = load_benchmark("hindsight")
switch_at = load_benchmark("switch_at")
window = load_benchmark("window")
decima_differences = load_benchmark("decima_differences")
fair_variants = load_benchmark("fair_variants")
idle_room = load_benchmark("idle_room")
idle_map = load_benchmark("idle_map")
alibaba_speed = load_benchmark("alibaba_speed")
inspector = load_benchmark("inspector")
rigid_calibration = load_benchmark("rigid_calibration")
brain_shared = load_benchmark("brain_shared")
optimum = load_benchmark("optimum")
round_cost = load_benchmark("round_cost")
live_forecast = load_benchmark("live_forecast")
live_pool = load_benchmark("live_pool")
live_scores = load_benchmark("live_scores")
gantt = load_benchmark("gantt")
live_forecast_paired = load_benchmark("live_forecast_paired")


def test_description_is_the_docstrings_first_paragraph_on_one_line() -> None:
    doc = "A first sentence that wraps\n  onto a second line.\n\nDetails.\n"
    assert description(doc) == "A first sentence that wraps onto a second line."
    assert description("By CP-\n    SAT, on held-\nout seeds.") == "By CP-SAT, on held-out seeds."
    assert description(None) == ""


def test_no_benchmark_cuts_its_description_at_the_first_line() -> None:
    cut = re.compile(r"description=\w*doc\w*\.(splitlines\(\)|split\(\"\\n\"\))\[0\]")
    found = [p.name for p in sorted(BENCHMARKS.glob("*.py")) if cut.search(p.read_text())]
    assert found == []


SCRIPTS = sorted(
    p.stem
    for p in BENCHMARKS.glob("*.py")
    if "ArgumentParser(" in (text := p.read_text()) and '__name__ == "__main__"' in text
)
"""The benchmarks a user runs with options (the rest are modules the scripts share)."""


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_scripts_help_gives_its_docstrings_first_paragraph(name: str) -> None:
    doc = ast.get_docstring(ast.parse((BENCHMARKS / f"{name}.py").read_text()))
    squashed = "".join(benchmark_help(name).split())  # (argparse wraps at its own width)
    assert "".join(description(doc).split()) in squashed


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
        (twins, ["srpt", "--twins", ","], "give at least one twin"),
        (hindsight, ["--among", "nope"], "--among names 'nope'"),
        (switch_at, ["srpt", "fair"], "T:SPEC"),
        (window, ["--scheduler", "nope:x", "--seeds", "1"], "unknown scheduler 'nope'"),
        (decima_differences, ["--tpch-dir", "/nonexistent"], "does not exist"),
        (fair_variants, ["--tpch-dir", "/nonexistent", "--seeds", "1"], "does not exist"),
        (idle_room, ["--loads", "0", "--seeds", "1"], "greater than 0"),
        (idle_map, ["--sweep", "gap=1,2"], "unknown knob 'gap'"),
        (alibaba_speed, ["--alibaba-dir", "/nonexistent"], "does not exist"),
        (inspector, ["--base", "nope"], "unknown scheduler 'nope'"),
        (rigid_calibration, ["--reference", "/nonexistent.json"], "no reference file"),
        (brain_shared, ["/nonexistent.json"], "cannot read /nonexistent.json"),
        (brain_shared, [__file__], "as an `idlegate compare --json` output"),
        (optimum, ["--workloads", "file:/nonexistent.json", "--seeds", "1"], "does not exist"),
        (round_cost, ["-w", "nosuch"], "unknown workload 'nosuch'"),
        (round_cost, ["--schedulers", "srpt,nosuch"], "unknown scheduler 'nosuch'"),
        (round_cost, ["--schedulers", "default?nosuch=1"], "no parameter 'nosuch'"),
        (round_cost, ["--seed", "-1"], "a seed must be"),
        (round_cost, ["-k", "0"], "--executors"),
        (round_cost, ["--jobs-count", "0"], "--jobs-count"),
        (round_cost, ["--interarrival", "-1"], "no option --interarrival"),
        (round_cost, ["-w", "tpch", "--tpch-dir", "/nonexistent"], "does not exist"),
        (live_forecast, ["--speed", "0"], "--speed"),
        (live_forecast, ["--policy", "nosuch"], "unknown scheduler 'nosuch'"),
        (live_forecast, ["--runs", "0"], "--runs"),
        (live_pool, ["--speed", "0"], "--speed"),
        (live_pool, ["--policies", "default,nosuch"], "unknown scheduler 'nosuch'"),
        (live_pool, ["--runs", "0"], "--runs"),
        (live_pool, ["--burn", "-1"], "--burn -1 is negative"),
        (live_pool, ["--burn-nice", "0,3"], "give --burn N too"),
        (live_pool, ["--burn", "2", "--burn-nice", "0,20"], "give whole numbers from 0 to 19"),
        (live_pool, ["--burn", "2", "--burn-nice", "3,x"], "'3,x' is not a list of nicenesses"),
        (live_pool, ["--flood", "0"], "--flood 0 is not above 0"),
        (live_pool, ["--visibility", "0"], "--visibility 0.0 is not above 0"),
        # issue 93, item 13: refused before the header and the runs
        (queues, ["--seeds", "0"], "--seeds must be at least 1, got 0"),
        (queues, ["--seeds", "-2"], "--seeds must be at least 1, got -2"),
        (queues, ["--first-seed", "-1"], "--first-seed must be 0 or more, got -1"),
        (queues, ["--grace", "-1"], "--grace must be 0 or more seconds, got -1"),
        (queues, ["--json", "."], "cannot write the figures to .: it is a directory"),
        (gantt, ["--out", "x.txt"], "it is written as .png, so give a name ending so, e.g. x.png"),
        (gantt, ["--out", "."], "cannot write the Gantt chart to .: it is a directory"),
    ],
)
def test_a_users_mistake_is_one_error_line_and_exit_1(
    module: object,
    argv: list[str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if hasattr(module, "ApiServer"):  # (a live benchmark refuses before its server starts)
        monkeypatch.setattr(module, "ApiServer", None)
    with pytest.raises(SystemExit) as stopped:
        module.main(argv)  # type: ignore[attr-defined]
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and said in err
    assert len(err.strip().splitlines()) == 1, err


BLOCKED = (
    "import importlib.abc, runpy, sys\n"
    "class Missing(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] in {'kopf', 'kubernetes', 'kmock', 'playwright', 'aiohttp'}:\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, Missing())\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
"""Runs a script as `make demo`'s environment would: without the dev and operator extras."""


@pytest.mark.parametrize(
    ("script", "extra"),
    [("live_pool", "operator"), ("live_scores", "operator"), ("dashboard_screenshots", "dev")],
)
def test_a_script_that_needs_an_extra_names_it_even_for_help(script: str, extra: str) -> None:
    # (issue 93, item 13: a traceback of ModuleNotFoundError, the extra named nowhere)
    path = BENCHMARKS / f"{script}.py"
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED, str(path), "--help"], capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"Error: this needs the '{extra}' extra"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_live_forecast_paired_refuses_a_clock_that_does_not_move(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("benchmarks.live_forecast.run", None)  # (refused before any run)
    with pytest.raises(SystemExit) as stopped:
        live_forecast_paired.main(["--code", "/nonexistent", "--speed", "0"])
    said = str(stopped.value.code)
    assert said.startswith("Error: --speed") and "\n" not in said


def test_live_scores_says_what_file_it_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "text.json").write_text("not JSON")
    (tmp_path / "other.json").write_text('{"run": 1}')
    for name in ("missing.json", "text.json", "other.json"):
        with pytest.raises(SystemExit) as stopped:
            live_scores.main([str(tmp_path / name)])
        assert stopped.value.code == 1
        err = capsys.readouterr().err
        assert err.startswith("Error: ") and "live_forecast --json" in err, err
        assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("module", [round_cost, live_forecast, live_pool, live_scores])
def test_the_scripts_options_show_their_defaults(module: object) -> None:
    parser: argparse.ArgumentParser = module.parser()  # type: ignore[attr-defined]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._StoreTrueAction):
            continue
        assert action.help, action.option_strings
        if action.option_strings:
            assert "default" in action.help, action.option_strings


def test_round_costs_table_names_the_scheduler_it_divides_by(
    capsys: pytest.CaptureFixture[str],
) -> None:
    round_cost.main(["-w", "synthetic", "--jobs-count", "3", "--schedulers", "fifo,srpt"])
    header = capsys.readouterr().out.splitlines()[1]
    assert "× fifo" in header and "× first" not in header


SEEDS = {
    "alibaba_speed": ("5", None),
    "argo_gain": ("10", "1000"),
    "brain": ("10", "1000"),
    "brain_only": ("3", "2000"),
    "brain_prior": ("5", "2000"),
    "brain_watch": ("10", "1000"),
    "decima_differences": ("3", None),
    "default_targets": ("3", "1000"),
    "fair_variants": ("5", None),
    "futures": ("5", "1000"),
    "hindsight": ("10", "1000"),
    "idle_room": ("20", None),
    "idles": ("5", "1000"),
    "late_starts": ("10", "1000"),
    "lookahead": ("3", "1000"),
    "optimum": ("2", None),
    "queues": ("10", "1000"),
    "reclaim_stops": ("4", "200"),
    "twins": ("10", "1000"),
    "window": ("30", "1000"),
}
"""Each script's ``--seeds`` and ``--first-seed`` defaults (None: seeds 0 to N-1), as they
were before `add_seeds` declared them: a user's command line means what it meant."""


def test_every_script_declaring_seeds_is_in_the_table() -> None:
    found = {p.stem for p in BENCHMARKS.glob("*.py") if "add_seeds(" in p.read_text()}
    assert found == set(SEEDS)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_a_scripts_help_shows_its_seed_defaults(name: str) -> None:
    said = " ".join(benchmark_help(name).split())
    seeds, first = SEEDS[name]
    assert re.search(rf"--seeds SEEDS [^()]*\(default {seeds}\b", said), said
    first_shown = re.search(r"--first-seed FIRST_SEED the first seed \(default (\d+)\)", said)
    assert (first_shown and first_shown[1]) == first, said


def test_seed_options_ask_for_seeds_from_the_first_seed() -> None:
    parser = argparse.ArgumentParser()
    add_seeds(parser, 10, 2000)
    assert seed_range(parser.parse_args([])) == range(2000, 2010)
    assert seed_range(parser.parse_args(["--seeds", "3", "--first-seed", "7"])) == range(7, 10)
    alone = argparse.ArgumentParser()
    add_seeds(alone, 4)
    assert vars(alone.parse_args([])) == {"seeds": 4}


def _imports_a_sibling(path: Path) -> bool:
    """Whether the script imports another script of benchmarks/ by its bare name (which
    only its own ``sys.path`` entry makes importable under ``python -m benchmarks.X``)."""
    siblings = {p.stem for p in BENCHMARKS.glob("*.py")}
    for node in ast.parse(path.read_text()).body:
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom) and not node.level
            else []
        )
        if any(n.split(".")[0] in siblings for n in names):
            return True
    return False


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in BENCHMARKS.glob("*.py") if _imports_a_sibling(p))
)
def test_a_script_that_imports_its_siblings_runs_as_the_docs_give_it(name: str) -> None:
    # docs give `.venv/bin/python -m benchmarks.X` from the repository root: a bare
    # `from brain_only import ...` failed there with ModuleNotFoundError
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--help"],
        cwd=BENCHMARKS.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_live_scores_names_the_codes_a_file_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run.json"
    run.write_text('[{"code": "/a/src", "run": "node pool, cold", "outcomes": []}]')
    with pytest.raises(SystemExit) as stopped:
        live_scores.main([str(run), "--code", "/nonexistent"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "no runs of the code /nonexistent; it holds: /a/src" in err, err
