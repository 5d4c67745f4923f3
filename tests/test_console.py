"""The console tables' wording (known answers on hand-built accounts), and the progress
long commands show on stderr (`idlegate.progress`, on a fake clock and fake streams)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from idlegate import progress
from idlegate.cli import app
from idlegate.evaluation.console import render_followed
from idlegate.progress import clock_text, status, stderr_progress

ROOT = Path(__file__).resolve().parents[1]

ROUND = {
    "at": 180.0,
    "candidate": "srpt",
    "reason": "best",
    "workflows": 40,
    "score": 32.4,
    "runner_up": "fifo",
    "runner_up_score": 33.0,
    "left_out": [],
}


@pytest.mark.parametrize(
    ("followed", "title"),
    [
        ([], "Followed: learned:default, no round ran"),
        (["learned:default"], "Followed: 1 round, 0 switches"),  # kept the start
        (["srpt"], "Followed: 1 round, 1 switch"),
        (["srpt", "srpt"], "Followed: 2 rounds, 1 switch"),
        (["srpt", "fifo", "srpt"], "Followed: 3 rounds, 3 switches"),
    ],
)
def test_the_followed_table_counts_rounds_and_switches(followed: list[str], title: str) -> None:
    # the switches are the changes of the candidate each round followed, from the start on
    account = {
        "start": "learned:default",
        "rounds": [{**ROUND, "candidate": c} for c in followed],
        "time_followed": {"learned:default": 180.0, "srpt": 60.0},
    }
    table = render_followed(account)
    assert table.title == title
    assert table.row_count == len(followed) + 1  # (the cold start's row first)
    assert table.caption == "share of the run: learned:default 75 %, srpt 25 %"


def test_the_title_counts_the_priors_lookups_apart_from_the_rounds() -> None:
    # the prior's lookup at the first decision is the start: no cold-start row, no switch
    # to it; a later lookup after a change of workload counts as one (its candidate moved)
    lookup = {**ROUND, "at": 0.0, "reason": "prior", "workflows": 0, "score": None}
    change = {**lookup, "at": 500.0, "reason": "change", "candidate": "fair"}
    account = {
        "start": "learned:default",
        "rounds": [lookup, ROUND, ROUND, change],
        "switches": 0,
        "time_followed": {"srpt": 500.0, "fair": 100.0},
    }
    table = render_followed(account)
    assert table.title == "Followed: 2 rounds, 2 lookups of the prior, 1 switch"
    assert table.row_count == 4
    assert next(iter(table.columns[1].cells)).startswith("started with srpt")


def test_each_row_says_what_the_round_did_in_words():
    switched = {**ROUND, "previous": "learned:default", "margin": None}
    switched["scores"] = {"srpt": 32.4, "fifo": 33.0, "learned:default": 36.0}
    switched["why"] = (
        "switched to srpt: 10 % better than learned:default, which no margin protected"
    )
    old = dict(ROUND)  # (an account written before the sentences: said from its fields)
    account = {
        "start": "learned:default",
        "rounds": [switched, old],
        "switches": 1,
        "time_followed": {"learned:default": 180.0, "srpt": 60.0},
    }
    table = render_followed(account)
    assert table.columns[1].header == "what it did, and why"
    assert list(table.columns[1].cells) == [
        "started with learned:default: no workflow finished yet",
        switched["why"],
        "following srpt, the round's best",
    ]


def test_a_run_that_started_from_its_history_has_no_cold_start_row():
    first = {**ROUND, "reason": "prior history", "prior": 40, "source": "history file"}
    account = {"start": "learned:default", "rounds": [first], "switches": 1}
    table = render_followed({**account, "time_followed": {"srpt": 60.0}})
    assert list(table.columns[1].cells) == [
        "started with srpt: the best on the last 40 workflows (40 from the history file)"
    ]


COMPARE = ["compare", "-w", "tpch-like", "--jobs-count", "5", "--schedulers", "fifo,srpt"]
COMPARE += ["--seeds", "1", "-j", "1"]


def _terminal(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Make rich see (or not) a terminal on standard output and stderr (issue 60, 21)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1" if on else "0")


def test_compare_shows_its_progress_whenever_stderr_is_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
):
    runner = CliRunner()
    _terminal(monkeypatch, True)
    shown = runner.invoke(app, COMPARE)
    assert shown.exit_code == 0 and "simulating" in shown.stderr and "2/2" in shown.stderr
    assert "left" in shown.stderr  # (the time left, issue 69)
    as_json = runner.invoke(app, [*COMPARE, "--json"])
    _terminal(monkeypatch, False)
    piped_json = runner.invoke(app, [*COMPARE, "--json"])
    piped = runner.invoke(app, COMPARE)
    # --json: the progress on stderr too, and the JSON alone on stdout, byte for byte as piped
    assert "2/2" in as_json.stderr and "about" in as_json.stderr
    assert piped_json.stderr == "" and piped.stderr == ""  # (a run shorter than a line's 30 s)
    assert as_json.stdout == piped_json.stdout
    assert len(json.loads(as_json.stdout)["schedulers"]) == 2
    assert "simulating" not in piped.stdout and "\x1b" not in piped.stdout


def test_history_alibaba_shows_its_progress_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    # 51 s on a 270k-row CSV in silence
    path = tmp_path / "batch_task.csv"
    path.write_text("M1,2,j_1,1,Terminated,100,110,100,0.39\nM1,1,j_2,1,Running,1,2,,\n")
    runner = CliRunner()
    _terminal(monkeypatch, True)
    shown = runner.invoke(app, ["history", "alibaba", str(path)])
    assert shown.exit_code == 0 and "batch_task.csv" in shown.stderr and "2/2" in shown.stderr
    _terminal(monkeypatch, False)
    piped = runner.invoke(app, ["history", "alibaba", str(path)])
    summary = "1 of 2 job(s) converted; skipped: 1 not every task Terminated.\n"
    assert piped.stderr == summary and shown.stdout == piped.stdout


class _Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_the_status_says_the_time_left_at_the_pace_so_far():
    assert status(0, 36, 0.0) == "0/36 (0 %), 0:00 elapsed"  # (no pace yet: no estimate)
    assert status(12, 36, 19.0) == "12/36 (33 %), 0:19 elapsed, about 0:38 left"
    assert status(5, None, 65.0) == "5, 1:05 elapsed"  # (no total: no estimate)
    # resumed at 90 of 100: the 5 done here took 50 s, so the 5 left take 50 s more
    assert status(95, 100, 50.0, start=90) == "95/100 (95 %), 0:50 elapsed, about 0:50 left"
    assert clock_text(3725) == "1:02:05"


def test_the_time_left_is_at_the_pace_of_the_work_done():
    assert progress.time_left(19.0, 12, 36) == 38.0
    assert progress.time_left(50.0, 95, 100, start=90) == 50.0
    assert progress.time_left(10.0, 3, 3) == 0.0 and progress.time_left(5.0, 0, 9) is None
    # in units of cost: 180 s did 180 of 435, so 255 are left at a second each
    assert status(24, 45, 180.0, work=(180.0, 435.0, 0.0)) == (
        "24/45 (53 %), 3:00 elapsed, about 4:15 left"
    )


DEMO_SEED = [*(f"rule {i}" for i in range(7)), "learned", "default"]
"""A demo seed's nine runs, in the order it hands them out: the rules, then the dear two."""


def demo_steps() -> list[tuple[str, float]]:
    """The demo's 45 runs (five seeds of `DEMO_SEED`), each with its cost: 1 for a rule,
    20 learned, 60 default."""
    cost = {"learned": 20.0, "default": 60.0}
    return [(f"{name} seed {seed}", cost.get(name, 1.0)) for seed in range(5) for name in DEMO_SEED]


def test_steps_weighed_by_their_cost_say_the_time_left_of_the_demos_shape(
    monkeypatch: pytest.MonkeyPatch,
):
    # (issue 80: at 24 of 45 the demo said 2:02 left with 7:47 to go) five seeds of the
    # nine runs, each taking its cost in seconds: 7 rules of 1, learned 20, default 60
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    steps = demo_steps()
    lines = {}
    for weighed in (False, True):
        clock, err = _Clock(), _Stream(terminal=False)
        costs = dict(steps) if weighed else None
        with stderr_progress(
            "simulating", 45, stream=err, clock=clock, every=0.0, costs=costs
        ) as update:
            for done, (what, seconds) in enumerate(steps, start=1):
                clock.now += seconds
                update(done, 45, what)
        lines[weighed] = err.getvalue().splitlines()
    # 24 done: two seeds (174 s) and six rules; 255 s left, the 21 runs' costs
    at = "simulating: 24/45 (53 %), 3:00 elapsed, about"
    assert lines[True][23] == f"{at} 4:15 left; rule 5 seed 2"
    assert lines[False][23] == f"{at} 2:38 left; rule 5 seed 2"  # (as if runs cost alike)
    # known costs are exact at every step: the time left is what is left
    total = sum(c for _, c in steps)
    for done, line in enumerate(lines[True], start=1):
        spent = sum(c for _, c in steps[:done])
        assert line.split("about ")[1].startswith(f"{clock_text(total - spent)} left"), line


def test_the_start_before_the_first_step_is_not_read_as_its_pace(
    monkeypatch: pytest.MonkeyPatch,
):
    # (issue 93, item 14: the demo said "about 9:40 left" after 1 of 45 runs of a 25-s run)
    # 20 s of a pool's start (its processes, their imports), then the demo's 45 runs at
    # 1/8 s a unit of cost: 1 for a rule, 20 learned, 60 default
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    steps = demo_steps()
    clock, err = _Clock(), _Stream(terminal=False)
    with stderr_progress(
        "simulating", 45, stream=err, clock=clock, every=0.0, costs=dict(steps), warmup=True
    ) as update:
        clock.now += 20.0
        for done, (what, units) in enumerate(steps, start=1):
            clock.now += units / 8
            update(done, 45, what)
    lines = err.getvalue().splitlines()
    assert lines[0] == "simulating: 1/45 (2 %), 0:20 elapsed; rule 0 seed 0"
    total = sum(c for _, c in steps) / 8
    for done, line in enumerate(lines[1:], start=2):  # (what is left, to the second)
        left = total - sum(c for _, c in steps[:done]) / 8
        assert f"about {clock_text(left)} left" in line, line


def test_compare_and_the_replays_measure_their_pace_after_their_pools_start() -> None:
    import inspect

    from idlegate import cli_run
    from idlegate.evaluation import console

    for source in (inspect.getsource(console.run_compare), inspect.getsource(cli_run.advise)):
        assert "warmup=True" in source


def test_compare_weighs_each_run_by_its_schedulers_cost(monkeypatch: pytest.MonkeyPatch):
    from contextlib import contextmanager

    from idlegate.evaluation import console
    from idlegate.evaluation.comparison import CompareConfig, WorkloadOptions

    seen: dict[str, object] = {}

    @contextmanager
    def recorded(description, total=None, **kwargs):
        seen["costs"], seen["whats"] = kwargs.get("costs"), set()
        yield lambda done, total, what: seen["whats"].add(what)

    monkeypatch.setattr(console, "stderr_progress", recorded)
    config = CompareConfig(
        workload="tpch-like",
        schedulers=["fifo", "analytic:srpt", "learned:default"],
        seeds=2,
        baseline="fifo",
        options=WorkloadOptions(num_executors=5, extra={"num_stream": 2}),
        jobs=1,
    )
    console.run_compare(config, None)
    assert seen["costs"] == {
        "fifo seed 0": 1.0,
        "fifo seed 1": 1.0,
        "analytic:srpt seed 0": 1.0,
        "analytic:srpt seed 1": 1.0,
        "learned:default seed 0": 20.0,
        "learned:default seed 1": 20.0,
    }
    assert seen["whats"] == set(seen["costs"])  # (each run's update names its cost)


def test_progress_off_a_terminal_is_a_line_every_30_seconds(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    clock, err = _Clock(), _Stream(terminal=False)
    with stderr_progress("simulating", 36, stream=err, clock=clock) as update:
        for done in range(1, 37):  # 36 runs of 2 s each: 72 s, so two lines
            clock.now += 2.0
            update(done, 36, f"fifo seed {done}")
    assert err.getvalue().splitlines() == [
        "simulating: 15/36 (41 %), 0:30 elapsed, about 0:42 left; fifo seed 15",
        "simulating: 30/36 (83 %), 1:00 elapsed, about 0:12 left; fifo seed 30",
        # the last step, so the log does not stop short of the end
        "simulating: 36/36 (100 %), 1:12 elapsed, about 0:00 left; fifo seed 36",
    ]
    ended = _Stream(terminal=False)  # a last step that fell on a line: not written twice
    with stderr_progress("simulating", 2, stream=ended, clock=clock) as update:
        for done in range(1, 3):
            clock.now += 30.0
            update(done, 2, "")
    assert len(ended.getvalue().splitlines()) == 2
    short = _Stream(terminal=False)
    with stderr_progress("simulating", 3, stream=short, clock=clock) as update:
        for done in range(1, 4):
            clock.now += 2.0
            update(done, 3, "")
    assert short.getvalue() == ""  # (a run shorter than 30 s says nothing)


def test_progress_on_a_terminal_is_redrawn_at_each_step_with_the_time_left(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    clock, err = _Clock(), _Stream(terminal=True)
    with stderr_progress("replaying", stream=err, clock=clock) as update:
        clock.now += 4.0
        update(1, 4, "fair seed 0")
        assert "replaying" in err.getvalue()
        assert "1/4 (25 %), 0:04 elapsed, about 0:12 left  fair seed 0" in err.getvalue()
    off = _Stream(terminal=True)
    with stderr_progress("training", 3, enabled=False, stream=off, clock=clock) as update:
        update(1, 3, "")
    assert off.getvalue() == ""


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_compare_piped_writes_its_progress_lines_on_stderr(
    monkeypatch: pytest.MonkeyPatch, json_flag: list[str]
):
    # (piped, a compare of a minute showed nothing for its whole run: issue 69)
    _terminal(monkeypatch, False)
    monkeypatch.setattr(progress, "EVERY", 0.0)  # (a line at every run, not every 30 s)
    r = CliRunner().invoke(app, [*COMPARE, *json_flag])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert lines[-1].startswith("simulating: 2/2 (100 %), ") and "left" in lines[-1]
    assert "simulating" not in r.stdout


FORECAST = ["-w", "k8s-batch", "--jobs-count", "5", "-m", "2", "--seed", "1", "-s", "fifo"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["simulate", "-w", "k8s-batch", "--jobs-count", "5", "-s", "fifo"], "simulating: "),
        (["history", "simulate", "-w", "k8s-batch", "--jobs-count", "5"], "simulating: "),
        (["forecast", "evaluate", *FORECAST], "forecasting: "),
    ],
)
def test_every_long_command_piped_writes_progress_lines_as_compare_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], said: str
):
    # (one mechanism, idlegate.progress: its lines off a terminal, the last its end)
    _terminal(monkeypatch, False)
    monkeypatch.setattr(progress, "EVERY", 0.0)  # (a line at every step, not every 30 s)
    out = ["--out", str(tmp_path / "history.yaml")] if args[0] == "history" else []
    r = CliRunner().invoke(app, [*args, *out])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if line.startswith(said)]
    assert len(lines) >= 2 and said not in r.stdout
    assert "(100 %)" in lines[-1], lines[-1]


README_DEMO = re.compile(
    r"<!-- BEGIN make demo table -->\n(.*?)<!-- END make demo table -->", re.DOTALL
)


def _demo_printing_the_readmes_cells(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, width: int):
    """What the demo prints on a console `width` wide, small, with the README's cells (the
    full demo's, widest included); and those cells."""
    from rich.console import Console

    from idlegate import cli_run
    from idlegate.evaluation import console

    lines = README_DEMO.search((ROOT / "README.md").read_text(encoding="utf-8"))[1].splitlines()
    readme = [[c.strip().strip("*") for c in line.strip("|").split("|")] for line in lines[2:]]
    monkeypatch.setattr(console, "table_rows", lambda cmp: readme)
    monkeypatch.setattr(cli_run, "DEMO_SEEDS", 2)
    monkeypatch.setattr(cli_run, "DEMO_STREAMED_JOBS", 4)
    monkeypatch.setattr(cli_run, "DEMO_EXECUTORS", 10)
    monkeypatch.setattr(cli_run, "stdout_console", lambda: Console(width=width))
    r = CliRunner().invoke(app, ["demo", "--out", str(tmp_path), "--jobs", "1"])
    assert r.exit_code == 0, r.output
    return r.stdout.splitlines(), readme


def test_the_demo_table_fits_100_columns_with_each_row_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # piped (120 columns): its box was 120 wide and broke eight rows' last cell over two
    printed, readme = _demo_printing_the_readmes_cells(monkeypatch, tmp_path, 120)
    assert max(map(len, printed)) <= 100, "\n".join(p for p in printed if len(p) > 100)
    for cells in readme:
        row = next(p for p in printed if p.startswith(f"{cells[0]} "))
        assert row.split() == " ".join(cells).split()  # every cell, in order, on its line


def test_the_demo_table_fits_a_terminal_of_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (it wrapped there: issue 80) each figure over its CI, every cell of the README's
    printed, readme = _demo_printing_the_readmes_cells(monkeypatch, tmp_path, 80)
    assert max(map(len, printed)) <= 80, "\n".join(p for p in printed if len(p) > 80)
    for cells in readme:
        at = next(i for i, p in enumerate(printed) if p.startswith(f"{cells[0]} "))
        figures = [c.split(" ± ") for c in cells[1:]]
        assert printed[at].split() == [cells[0], *" ".join(f[0] for f in figures).split()]
        cis = [f"± {f[1]}" for f in figures if len(f) == 2]
        assert printed[at + 1].split() == " ".join(cis).split()


def test_the_followed_table_folds_its_figures_under_the_sentence_at_80_columns() -> None:
    from rich.console import Console

    account = {"start": "fifo", "rounds": [ROUND], "time_followed": {"srpt": 60.0}}
    table = render_followed(account, 80)
    assert [c.header for c in table.columns] == ["at (s)", "what it did, and why"]
    said = list(table.columns[1].cells)[1]
    assert said.endswith(
        "window 40 · its replay (s) 32.4 · runner-up (s) fifo 33.0 · left out 0[/]"
    )
    out = io.StringIO()
    Console(file=out, width=80).print(table)
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80
    assert len(render_followed(account).columns) == 6  # wide enough: one figure a column


@pytest.mark.parametrize("reclaim", ["Any", "Never"])
def test_a_run_that_preempted_says_so_in_its_tables(reclaim: str) -> None:
    # queues.md: a run's metrics count the tasks stopped and the work lost; a run that
    # stopped none has no such rows (the tables of every other run stay as they were)
    run = ["-w", "teams", "-o", "scenario=large", "-o", "num_jobs=10", "-o", f"reclaim={reclaim}"]
    simulated = CliRunner().invoke(app, ["simulate", *run, "-s", "srpt", "--seed", "1000"])
    compared = CliRunner().invoke(
        app, ["compare", *run, "--schedulers", "srpt", "--seeds", "1", "--first-seed", "1000"]
    )
    assert simulated.exit_code == 0 and compared.exit_code == 0, simulated.output
    preempted = re.search(r"tasks preempted \(each ran again\)\s*│\s*(\d+)", simulated.output)
    assert (preempted is not None and int(preempted[1]) > 0) == (reclaim == "Any")
    assert ("work lost (%)" in compared.output) == (reclaim == "Any")


TEAMS_RUN = ["simulate", "-w", "teams", "-o", "scenario=large", "-o", "num_jobs=10"]
FORECAST_RUN = [*TEAMS_RUN, "-o", "reclaim=Any", "-s", "srpt", "--seed", "1000"]


def test_a_run_decided_on_forecasts_shows_the_judges_verdicts() -> None:
    # queues.md describes the verdicts; simulate printed the stops and the work lost but
    # not them (only benchmarks/queues.py counted them: issue 82)
    from idlegate.evaluation.console import VERDICTS_ROW

    runner = CliRunner()
    forecast = [*FORECAST_RUN, "-o", "decide=Forecast"]
    table = runner.invoke(app, forecast)
    data = json.loads(runner.invoke(app, [*forecast, "--json"]).stdout)
    assert table.exit_code == 0, table.output
    verdicts = data["verdicts"]
    assert list(verdicts) == ["bound", "pays", "declined", "cut"] and sum(verdicts.values()) > 0
    row = re.search(re.escape(VERDICTS_ROW) + r"\s*│\s*([^│]+?)\s*│", table.output)
    assert row is not None, table.output
    cases = verdicts.values()
    assert row[1] == "{} / {}; {}; {}".format(*cases)
    # decided by the rules, no judge ran: no such row, no such key
    rules = runner.invoke(app, [*forecast[:-1], "decide=Rules", "--json"])
    assert "verdicts" not in json.loads(rules.stdout) and "preempted" in rules.stdout


@pytest.mark.parametrize("columns", ["80", "120", None])
def test_a_piped_run_honours_columns(columns: str | None) -> None:
    # piped with COLUMNS=80, simulate's queues table was 120 wide (issue 80): COLUMNS is
    # the width when it is set, a terminal or not; 120 when it is not
    shown = CliRunner().invoke(app, [*TEAMS_RUN, "-s", "fifo"], env={"COLUMNS": columns})
    assert shown.exit_code == 0, shown.output
    widest = max(len(line) for line in shown.stdout.splitlines())
    assert widest <= int(columns or 120) and (widest > 80) == (columns != "80")
    folded = re.search(r"│ worst / p99\.9 wait \(s\) [\d,]+ / ", shown.stdout)  # (a cell's line)
    assert (folded is not None) == (columns == "80")
