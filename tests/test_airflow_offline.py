"""Airflow offline: `idlegate lint` and history files (simulate -w file) read DAG exports,
and `idlegate history airflow` imports a recorded Airflow's runs (replayed over HTTP)."""

from __future__ import annotations

import json
import logging

import pytest
from typer.testing import CliRunner

from idlegate.api.lint import lint_paths
from idlegate.cli import app
from idlegate.integrations.airflow import AirflowError, read_auth
from idlegate.sim.airflow import AirflowRefusal
from idlegate.sim.history import load_history
from tests.airflow_data import PASSWORD, examples, replaying, session
from tests.test_airflow_mapping import export, run, task, ti


def test_lint_maps_a_list_of_exports_and_says_why_what_does_not_map(tmp_path):
    found = examples()
    chosen = [found[d] for d in ("tutorial", "example_sensors", "example_workday_timetable")]
    cycle = export(task("a", "b"), task("b", "a"))
    path = tmp_path / "dags.json"
    path.write_text(json.dumps([*chosen, cycle]))
    report = lint_paths([str(path)])
    assert [j.job.dag_id for j in report.airflow_jobs] == ["tutorial", "example_sensors"]
    assert report.airflow_dags == 4 and not report.ok
    assert [n.reason for n in report.notes] == ["no-tasks"]
    assert "every one is left to Airflow: run_this (no-pod)" in report.notes[0].message
    assert [p.reason for p in report.problems] == ["bad-dag"]
    assert "a -> b -> a" in str(report.problems[0])
    lines = report.airflow_jobs[1].lines()
    assert lines[0].endswith("maps to 3 stages, 2 edges, 3 tasks; 13 task(s) left to Airflow")
    assert "of the Airflow DAGs, 2 map to jobs, 1 are left to Airflow" in report.summary()
    assert report.to_json()["airflow"][0]["dag_id"] == "tutorial"


def test_a_history_file_replays_an_exports_runs_and_leaves_a_changed_one_out(tmp_path, caplog):
    dag = export(
        task("a", "b"),
        task("b"),
        dag_runs=[
            run("r1", "2025-01-01T00:00:00Z", "2025-01-01T00:00:02Z", "2025-01-01T00:00:32Z"),
            run("r2", "2025-01-01T00:10:00Z", "2025-01-01T00:10:00Z", "2025-01-01T00:10:40Z"),
        ],
        task_instances=[ti("a", "r1", duration=5.0), ti("b", "r1"), ti("a", "r2")],
    )
    path = tmp_path / "history.json"
    path.write_text(json.dumps(dag))
    with caplog.at_level(logging.WARNING):
        (only,) = load_history(path)
    assert "run r2 has no instance of 'b'" in caplog.text
    assert (only.name, only.arrival, only.jct, only.outcome) == (
        "etl/r1",
        1735689600.0,
        30.0,
        "Succeeded",
    )
    assert only.measured == ((5.0,), (10.0,)) and only.template == "airflow:etl"
    assert only.spec.priorities == (2.0, 1.0)  # the airflow baseline's, carried along
    # an export without finished runs is the DAG itself
    path.write_text(json.dumps(export(task("a"))))
    (alone,) = load_history(path)
    assert alone.arrival is None and alone.name == "etl"


def test_a_file_of_many_dags_replays_those_idlegate_schedules_and_warns_of_the_rest(
    tmp_path, caplog
):
    found = examples()
    left = [found[d] for d in ("example_workday_timetable", "example_branch_labels")]
    path = tmp_path / "dags.json"
    path.write_text(json.dumps([found["tutorial"], *left]))
    with caplog.at_level(logging.WARNING):
        (only,) = load_history(path)
    assert only.name == "tutorial"
    warned = [r.getMessage() for r in caplog.records]
    # lint's note, reason and all, for each DAG left to Airflow
    notes = [n.message for n in lint_paths([str(path)]).notes]
    assert len(warned) == 2 and all(n in w for n, w in zip(notes, warned, strict=True))
    assert "(workflow #1): not scheduled by idlegate (no-tasks): DAG example_workday" in warned[0]
    # only a file of which no DAG maps is an error
    path.write_text(json.dumps(left))
    with pytest.raises(AirflowRefusal, match="none of its 2 Airflow DAGs has a task idlegate"):
        load_history(path)
    path.write_text(json.dumps(left[:1]))
    with pytest.raises(AirflowRefusal, match="example_workday_timetable has no task idlegate"):
        load_history(path)
    # a broken export is still an error, not a warning
    path.write_text(json.dumps([found["tutorial"], export(task("a", "b"), task("b", "a"))]))
    with pytest.raises(AirflowRefusal, match="a -> b -> a"):
        load_history(path)


def test_history_airflow_imports_the_runs_and_writes_the_raw_exports(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_PASSWORD", PASSWORD)
    runner = CliRunner()
    with replaying(session("example_dynamic_task_mapping")) as url:
        args = ["history", "airflow", "--url", url, "--dag", "example_dynamic_task_mapping"]
        args += ["--username", "admin", "--runs", "3"]
        done = runner.invoke(app, [*args, "-o", str(tmp_path / "h.yaml")])
        assert done.exit_code == 0, done.output
        # (into a folder not made yet, as docs/airflow.md's out/nightly_etl.json)
        raw = runner.invoke(app, [*args, "--raw", "-o", str(tmp_path / "out" / "raw.json")])
        assert raw.exit_code == 0, raw.output
        missing = runner.invoke(app, [*args[:5], "no_such_dag", *args[6:]])
    assert "3 run(s) of 1 DAG(s) written" in done.output
    runs = load_history(tmp_path / "h.yaml")
    assert [w.template for w in runs] == ["airflow:example_dynamic_task_mapping"] * 3
    assert [s.tasks for s in runs[0].spec.stages] == [3, 1]
    again = load_history(tmp_path / "out" / "raw.json")  # the raw export replays the same runs
    assert [(w.name, w.measured) for w in again] == [(w.name, w.measured) for w in runs]
    assert missing.exit_code == 1 and "has no DAG 'no_such_dag'" in missing.output


def test_secrets_come_from_files_or_the_environment_never_the_command_line(tmp_path, monkeypatch):
    monkeypatch.delenv("AIRFLOW_TOKEN", raising=False)
    monkeypatch.setenv("AIRFLOW_PASSWORD", "from-env")
    assert read_auth("admin", None, None).password == "from-env"
    (tmp_path / "token").write_text("jwt\n")
    assert read_auth(None, None, tmp_path / "token").token == "jwt"
    # a token file and a user: which identity is meant is not guessed (the token won, silently)
    with pytest.raises(AirflowError, match="both --airflow-token-file and --airflow-username"):
        read_auth("admin", None, tmp_path / "token", "--airflow-")
    assert "jwt" not in repr(read_auth(None, None, tmp_path / "token"))
    (tmp_path / "empty").write_text("")
    with pytest.raises(AirflowError, match="is empty"):
        read_auth("admin", tmp_path / "empty", None)
