"""The Airflow mapping (idlegate.sim.airflow): known answers on hand-built DAG exports of
2-5 tasks, in the shape Airflow's REST API gives them."""

from __future__ import annotations

from typing import Any

import pytest

from idlegate.sim.airflow import (
    AirflowCondition,
    AirflowRefusal,
    AirflowRefusalReason,
    LeftReason,
    airflow_runs,
    is_airflow,
    map_dag,
)
from idlegate.sim.external import DurationSource


def task(tid: str, *down: str, cls: str = "BashOperator", **more: Any) -> dict[str, Any]:
    module = more.pop("module", "airflow.providers.standard.operators.bash")
    return {
        "task_id": tid,
        "downstream_task_ids": list(down),
        "class_ref": {"module_path": module, "class_name": cls},
        "operator_name": cls,
        "is_mapped": False,
        "trigger_rule": "all_success",
        "retries": 0.0,
        "priority_weight": 1.0,
        "weight_rule": "downstream",
        **more,
    }


def export(*tasks: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"dag": {"dag_id": "etl", "max_active_tasks": 16}, "tasks": list(tasks), **more}


def ti(tid: str, run: str = "r1", state: str = "success", duration: float = 10.0, **more: Any):
    return {
        "task_id": tid,
        "dag_run_id": run,
        "state": state,
        "duration": duration,
        "map_index": -1,
        **more,
    }


def run(run_id: str, queued: str, start: str, end: str, state: str = "success") -> dict:
    return {
        "dag_run_id": run_id,
        "state": state,
        "queued_at": queued,
        "start_date": start,
        "end_date": end,
    }


GROUPED = export(
    task("extract", "clean.a", "clean.b"),
    task("clean.a", "load"),
    task("clean.b", "load", retries=2.0),
    task("load"),
)


def test_a_task_group_flattens_into_its_tasks_and_priorities_count_downstream():
    job = map_dag(GROUPED)
    assert [(s.name, s.depends_on) for s in job.stages] == [
        ("extract", ()),
        ("clean-a", ("extract",)),
        ("clean-b", ("extract",)),
        ("load", ("clean-a", "clean-b")),
    ]
    # downstream rule: its own weight plus every downstream task's
    assert [s.priority for s in job.stages] == [4.0, 2.0, 2.0, 1.0]
    assert job.stage("clean-b").retries == 2
    assert job.counts == {"stages": 4, "edges": 4, "tasks": 4}
    assert job.spec().priorities == (4.0, 2.0, 2.0, 1.0)
    assert job.spec().max_active_tasks == 16
    assert {s.duration_source for s in job.stages} == {DurationSource.PRIOR}
    assert job.template_key == "airflow:etl" and is_airflow(GROUPED)


def test_other_weight_rules_and_airflows_own_figure():
    dag = export(
        task("a", "b", weight_rule="absolute", priority_weight=5.0),
        task("b", "c", weight_rule="upstream"),
        task("c", priority_weight=3.0),
    )
    assert [s.priority for s in map_dag(dag).stages] == [5.0, 6.0, 3.0]
    # a run's task instances carry the priority Airflow gave them: it wins
    ran = {**dag, "task_instances": [ti("a", priority_weight=9), ti("b"), ti("c")]}
    job = map_dag(
        ran, run=run("r1", "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z", "2025-01-01T00:01:00Z")
    )
    assert [s.priority for s in job.stages] == [9.0, 6.0, 3.0]


def test_a_mapped_task_is_one_stage_sized_by_the_run():
    dag = export(task("make", "each"), task("each", "sum", is_mapped=True), task("sum"))
    alone = map_dag(dag)
    assert (alone.stage("each").tasks, alone.stage("each").tasks_known) == (1, False)
    instances = [ti("make"), *(ti("each", map_index=i) for i in range(3)), ti("sum")]
    r = run("r1", "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z", "2025-01-01T00:01:00Z")
    job = map_dag({**dag, "task_instances": instances}, run=r)
    assert (job.stage("each").tasks, job.stage("each").tasks_known) == (3, True)
    assert job.counts == {"stages": 3, "edges": 2, "tasks": 5}


def test_sensors_deferrable_and_empty_tasks_are_left_to_airflow_their_edges_passed_on():
    dag = export(
        task(
            "wait",
            "start",
            cls="FileSensor",
            module="airflow.providers.standard.sensors.filesystem",
        ),
        task("start", "work", cls="EmptyOperator"),
        task("work", "notify", "approve"),
        task(
            "approve",
            "publish",
            cls="ApprovalOperator",
            module="airflow.providers.standard.operators.hitl",
        ),
        task("notify", "publish"),
        task("publish"),
    )
    job = map_dag(dag)
    assert [(s.name, s.depends_on) for s in job.stages] == [
        ("work", ()),
        ("notify", ("work",)),
        ("publish", ("work", "notify")),  # through approve, then notify
    ]
    assert [(t.task_id, t.reason) for t in job.left] == [
        ("wait", LeftReason.SENSOR),
        ("start", LeftReason.NO_POD),
        ("approve", LeftReason.DEFERRABLE),
    ]
    assert "sensor" in job.left[0].message
    # priorities still count the tasks left to Airflow, as Airflow does
    assert job.stage("work").priority == 4.0


def test_a_task_seen_deferred_in_a_run_is_left_to_airflow():
    dag = export(task("wait", "work", cls="TimeDeltaSensorish"), task("work"))
    assert [t.task_id for t in map_dag(dag).left] == ["wait"]  # 'Sensor' in its class name
    dag = export(task("poll", "work", cls="RemoteJobOperator"), task("work"))
    assert map_dag(dag).left == ()
    deferred = {**dag, "task_instances": [ti("poll", trigger={"id": 4}), ti("work")]}
    left = map_dag(deferred).left
    assert [(t.task_id, t.reason) for t in left] == [("poll", LeftReason.DEFERRABLE)]


def test_branches_and_trigger_rules_make_stages_conditional_and_a_run_skips_them():
    dag = export(
        task("pick", "left", "right", cls="BranchPythonOperator"),
        task("left", "join"),
        task("right", "join"),
        task("join", trigger_rule="none_failed_min_one_success"),
    )
    job = map_dag(dag)
    assert [s.condition for s in job.stages] == [
        None,
        AirflowCondition.BRANCH,
        AirflowCondition.BRANCH,
        AirflowCondition.TRIGGER_RULE,
    ]
    instances = [ti("pick"), ti("left"), ti("right", state="skipped", duration=None), ti("join")]
    r = run("r1", "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z", "2025-01-01T00:01:00Z")
    spec = map_dag({**dag, "task_instances": instances}, run=r).spec()
    assert [(s.name, s.depends_on) for s in spec.stages] == [
        ("pick", ()),
        ("left", ("pick",)),
        ("join", ("left", "pick")),
    ]


@pytest.mark.parametrize(
    ("dag", "reason", "words"),
    [
        (export(task("a", "b")), AirflowRefusalReason.BAD_DAG, "'b', which is no task"),
        (export(task("a", "b"), task("b", "a")), AirflowRefusalReason.BAD_DAG, "a -> b -> a"),
        (
            export(task("s", cls="PythonSensor"), task("e", cls="EmptyOperator")),
            AirflowRefusalReason.NO_TASKS,
            "s (sensor), e (no-pod)",
        ),
        (
            {"dag_id": "x", "stages": []},
            AirflowRefusalReason.NOT_A_DAG,
            "not an Airflow DAG export",
        ),
        (export({"downstream_task_ids": []}), AirflowRefusalReason.INVALID, "has no task_id"),
        (export(task("a"), task("a")), AirflowRefusalReason.INVALID, "listed twice"),
    ],
)
def test_a_dag_that_does_not_map_is_refused_with_its_reason(dag, reason, words):
    with pytest.raises(AirflowRefusal) as caught:
        map_dag(dag)
    assert caught.value.reason is reason and words in str(caught.value)


def test_a_run_that_does_not_fit_the_dag_any_more_is_refused_as_changed():
    dag = export(task("a", "b"), task("b"))
    r = run("r1", "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z", "2025-01-01T00:01:00Z")
    for instances, words in (
        ([ti("a"), ti("b"), ti("old")], "ran 'old', which the DAG no longer has"),
        ([ti("a")], "has no instance of 'b'"),
    ):
        with pytest.raises(AirflowRefusal) as caught:
            map_dag({**dag, "task_instances": instances}, run=r)
        assert caught.value.reason is AirflowRefusalReason.CHANGED
        assert words in str(caught.value) and "DAG changed since this run" in str(caught.value)


def test_runs_are_a_history_whose_estimates_are_the_earlier_runs_durations():
    dag = export(
        task("a", "b"),
        task("b"),
        dag_runs=[
            run("r2", "2025-01-01T01:00:00Z", "2025-01-01T01:00:05Z", "2025-01-01T01:01:05Z"),
            run("r1", "2025-01-01T00:00:00Z", "2025-01-01T00:00:02Z", "2025-01-01T00:00:32Z"),
            run("r3", "2025-01-01T02:00:00Z", "2025-01-01T02:00:00Z", "2025-01-01T02:00:30Z"),
            {**run("r4", "2025-01-01T03:00:00Z", "2025-01-01T03:00:00Z", ""), "state": "running"},
        ],
        task_instances=[
            ti("a", "r1", duration=10.0),
            ti("b", "r1", duration=20.0),
            ti("a", "r2", duration=30.0),
            ti("b", "r2", duration=30.0),
            ti("a", "r3"),
            ti("b", "r3"),
            ti("c", "r3"),  # a task the DAG no longer has
        ],
    )
    found = airflow_runs(dag)
    assert [r.run_id for r in found.runs] == ["r1", "r2"]  # oldest first; r4 unfinished
    first, second = found.runs
    assert [s.duration_source for s in first.job.stages] == [DurationSource.PRIOR] * 2
    assert [s.duration for s in second.job.stages] == [10.0, 20.0]  # r1's, not its own
    assert second.measured == ((30.0,), (30.0,))
    assert (first.jct, second.jct) == (30.0, 60.0)
    assert second.arrival - first.arrival == 3600.0
    assert len(found.left_out) == 1 and "run r3 ran 'c'" in found.left_out[0]
    assert found.history("airflow:etl", "a") == 20.0


def test_a_dag_of_thousands_of_tasks_is_mapped_not_refused():
    # Airflow runs it, so idlegate orders it: once 500 tasks were refused (issue 61)
    n = 2000
    job = map_dag(export(*(task(f"t{i}", *([f"t{i + 1}"] if i + 1 < n else [])) for i in range(n))))
    assert len(job.spec().stages) == n
