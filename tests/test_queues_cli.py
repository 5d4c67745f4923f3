"""Queues from the command line: `--queues FILE`, `-w teams`, per-queue figures."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from idlegate.cli import app

runner = CliRunner()

WORKFLOW = """\
apiVersion: idlegate.io/v1alpha1
kind: DagWorkflow
metadata: {name: w}
spec:
  queueName: QUEUE
  stages:
    - {name: a, tasks: 2, taskDurationSeconds: 10}
"""


def _workflow(name: str, queue: str, tasks: int) -> str:
    stage = f"{{name: s, tasks: {tasks}, taskDurationSeconds: 10}}"
    return (
        WORKFLOW.replace("name: w", f"name: {name}")
        .replace("QUEUE", queue)
        .replace("{name: a, tasks: 2, taskDurationSeconds: 10}", stage)
    )


def test_simulate_writes_each_queues_figures(tmp_path):
    # worked by hand: 2 pods, queues a and b of 1 pod each, fifo; at t = 0 `wide` (queue
    # a: 2 tasks of 10 s) and `one` (queue b: 1 task). b is under its quota with a task
    # ready, so a may not borrow b's pod: a's second task waits 10 s and `wide` ends at 20
    # (on one queue it would take both pods and `one` would end at 20). Alone on its 1
    # pod each takes as long: ρ 1 and 1. a's waits are 0 and 10 s (p99.9 9.99, linear);
    # only a ever waits, so no time with two queues waiting: no Jain's index.
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: a, nominal: {pods: 1}}\n- {name: b, nominal: {pods: 1}}\n")
    flows = tmp_path / "w.yaml"
    flows.write_text(_workflow("wide", "a", 2) + "---\n" + _workflow("one", "b", 1))
    args = ["simulate", "-w", "file", "--file", str(flows), "-k", "2", "-s", "fifo", "--json"]
    out = runner.invoke(app, [*args, "--queues", str(queues)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    figures = {q["queue"]: q for q in data["queues"]}
    assert {k: figures["a"][k] for k in ("workflows", "mean_jct", "rho", "worst_wait")} == {
        "workflows": 1,
        "mean_jct": 20.0,
        "rho": 1.0,
        "worst_wait": 10.0,
    }
    assert figures["a"]["p999_wait"] == pytest.approx(9.99)
    assert {k: figures["b"][k] for k in ("workflows", "mean_jct", "rho", "worst_wait")} == {
        "workflows": 1,
        "mean_jct": 10.0,
        "rho": 1.0,
        "worst_wait": 0.0,
    }
    assert data["jain"] is None and data["avg_jct"] == 15.0
    assert all(q["borrowed"] == {} == q["lent"] and q["overdue"] == 0 for q in figures.values())

    # b with nothing to run: a borrows b's pod for one task of 10 s and ends at 20 s,
    # against 30 s alone on its one pod (ρ 2/3); b lent those 10 pod-seconds
    flows.write_text(_workflow("wide", "a", 3))
    out = runner.invoke(app, [*args, "--queues", str(queues)])
    assert out.exit_code == 0, out.output
    a, b = json.loads(out.stdout)["queues"]
    assert (a["mean_jct"], a["rho"], a["borrowed"]) == (20.0, pytest.approx(2 / 3), {"pods": 10.0})
    assert (b["workflows"], b["rho"], b["lent"]) == (0, None, {"pods": 10.0})

    # -w teams: a queue per team, each with its workflows
    out = runner.invoke(
        app, ["simulate", "-w", "teams", "-o", "num_jobs=4", "-s", "srpt", "--json"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [q["queue"] for q in data["queues"]] == ["team-a", "team-b", "team-c"]
    assert all(q["workflows"] >= 4 and q["rho"] > 0 for q in data["queues"])


def test_a_queues_file_admits_a_workflow_file_by_its_queue_name(tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: default, nominal: {pods: 2}}\n- {name: ml, nominal: {pods: 2}}\n")
    flow = tmp_path / "w.yaml"
    flow.write_text(WORKFLOW.replace("QUEUE", "ml"))
    args = ["simulate", "-w", "file", "--file", str(flow), "-k", "4", "-s", "fifo"]
    out = runner.invoke(app, [*args, "--queues", str(queues), "--json"])
    assert out.exit_code == 0, out.output
    figures = {q["queue"]: q["workflows"] for q in json.loads(out.stdout)["queues"]}
    assert figures == {"default": 0, "ml": 1}
    table = runner.invoke(app, [*args, "--queues", str(queues)]).output
    empty = next(line for line in table.splitlines() if "│ default" in line)
    assert [c.strip() for c in empty.split("│")[1:5]] == ["default", "0", "—", "—"]
    flow.write_text(WORKFLOW.replace("QUEUE", "nope"))
    out = runner.invoke(app, [*args, "--queues", str(queues)])
    assert out.exit_code == 1
    assert out.output.strip() == (
        f"Error: workflow 'w-0' of {flow} names queue 'nope', which the queues file "
        f"{queues} does not declare (its queues: default, ml); declare it there, or name "
        "one of them"
    )


def test_quotas_past_the_pool_are_one_line(tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: a, nominal: {pods: 30}}\n")
    out = runner.invoke(app, ["simulate", "-k", "10", "--queues", str(queues)])
    assert out.exit_code == 1
    assert len(out.output.strip().splitlines()) == 1
    assert "add up to 30, more than the pool's 10" in out.output


def test_compare_writes_the_queues_of_each_seed_only_where_there_are_queues():
    args = ["compare", "--seeds", "1", "-j", "1", "--schedulers", "srpt", "--json"]
    teams = runner.invoke(app, [*args, "-w", "teams", "-o", "num_jobs=3"])
    assert teams.exit_code == 0, teams.output
    runs = json.loads(teams.stdout)["schedulers"]["srpt"]["queues_per_seed"]
    assert len(runs) == 1 and len(runs[0]["queues"]) == 3
    plain = runner.invoke(app, [*args, "-w", "tpch-like", "--jobs-count", "5", "-k", "5"])
    assert "queues_per_seed" not in json.loads(plain.stdout)["schedulers"]["srpt"]


def test_compare_prints_each_queue_of_each_scheduler_only_where_there_are_queues():
    args = ["compare", "--seeds", "2", "-j", "1", "--schedulers", "srpt,fifo"]
    teams = runner.invoke(app, [*args, "-w", "teams", "-o", "num_jobs=3"])
    assert teams.exit_code == 0, teams.output
    table = teams.output[teams.output.index("queues, over the seeds") :]
    rows = [line for line in table.splitlines() if "team-" in line]
    assert len(rows) == 6  # (three queues under each of two schedulers)
    assert rows[0].split("│")[1].strip() == "srpt" and rows[3].split("│")[1].strip() == "fifo"
    plain = runner.invoke(app, [*args, "-w", "tpch-like", "--jobs-count", "5", "-k", "5"])
    assert plain.exit_code == 0, plain.output
    assert "queues, over the seeds" not in plain.output


def test_lint_checks_a_queues_file_as_simulate_reads_it(tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text("- {name: a, nominal: {pods: 20}}\n- {name: b, nominal: {pods: 20}}\n")
    fine = runner.invoke(app, ["lint", str(queues)])
    assert fine.exit_code == 0, fine.output
    assert "skipped" not in fine.output
    past = runner.invoke(app, ["lint", str(queues), "--pool-size", "30"])
    assert past.exit_code == 1
    assert "add up to 40, more than the pool's 30" in past.output
    queues.write_text("- {name: a, nominal: {pods: 10}, waitBound: 0}\n")
    zero = runner.invoke(app, ["lint", str(queues)])
    assert zero.exit_code == 1
    assert "waitBound 0 must be a number of seconds > 0" in zero.output
    assert "Traceback" not in zero.output


def _printed(monkeypatch: pytest.MonkeyPatch, width: int, args: list[str]) -> list[str]:
    """What `args` print on a terminal `width` columns wide."""
    from rich.console import Console

    from idlegate import cli_run

    monkeypatch.setattr(cli_run, "stdout_console", lambda: Console(width=width))
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    return out.stdout.splitlines()


@pytest.mark.parametrize("width", [80, 120])
def test_the_queues_table_is_whole_at_80_and_at_120_columns(
    monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    # (issue 80) at 80 its eight columns cut their headers ("workfl…", "allowe…"): below
    # 100 the waits, the starts past the bound and the pods borrowed fold under the queue
    args = ["simulate", "-w", "teams", "-o", "num_jobs=3", "-s", "srpt", "--seed", "1000"]
    printed = _printed(monkeypatch, width, args)
    table = printed[next(i for i, p in enumerate(printed) if p.strip() == "queues") :]
    assert max(map(len, table)) <= width and not any("…" in p for p in table)
    head = [c.strip() for c in table[3].split("┃")[1:-1]]  # (the headers' second lines)
    rows = [[c.strip() for c in p.split("│")[1:-1]] for p in table if "│ team-" in p]
    assert [r[0] for r in rows] == ["team-a", "team-b", "team-c"]
    if width == 120:
        assert head[:6] == ["queue", "workflows", "(s)", "(s)", "ρ", "worst / p99.9 wait (s)"]
        assert all(len(r) == 8 and r[5].count(" / ") == 1 for r in rows)
        return
    assert head == ["queue", "workflows", "(s)", "(s)", "ρ"]
    assert all(len(r) == 5 for r in rows)
    cells = [p.split("│")[1].strip() for p in table if p.startswith("│ ")]
    for folded in ("worst / p99.9 wait (s) ", "past bound (beyond allowed) ", "borrowed pod-s "):
        assert sum(c.startswith(folded) for c in cells) == 3, cells


@pytest.mark.parametrize("width", [80, 120])
def test_the_compare_queues_table_is_whole_at_80_and_at_120_columns(
    monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    # a scheduler's long name cut to "admission?…" at 80: Jain, the worst wait and the
    # starts past the bound fold under the queue there
    args = ["compare", "-w", "teams", "-o", "num_jobs=3", "--seeds", "1", "-j", "1"]
    printed = _printed(monkeypatch, width, [*args, "--schedulers", "admission?mode=drf:srpt"])
    # (the comparison's table above it too: the name cut its headers, "makesp…")
    assert max(map(len, printed)) <= width and not any("…" in p for p in printed), printed
    table = printed[next(i for i, p in enumerate(printed) if "queues, over the seeds" in p) :]
    assert max(map(len, table)) <= width and not any("…" in p for p in table)
    rows = [[c.strip() for c in p.split("│")[1:-1]] for p in table if "│ team-" in p]
    assert rows[0][:2] == ["admission?mode=drf:srpt", "team-a"]
    assert [len(r) for r in rows] == [7 if width == 120 else 4] * 3
    if width == 80:
        cells = [p.split("│")[2].strip() for p in table if p.startswith("│ ")]
        assert sum(c.startswith("Jain ") for c in cells) == 1  # (the scheduler's, once)
        assert sum(c.startswith("worst wait (s) ") for c in cells) == 3
        assert sum(c.startswith("past bound ") for c in cells) == 3
