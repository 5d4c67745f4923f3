"""Airflow's client and mapping on answers recorded from a real Airflow 3.1.3 (its example
DAGs; tests/data/airflow), replayed over HTTP: what the client asks, what the mapping
makes of it, and the clear errors of a bad URL, bad credentials and an unknown DAG."""

from __future__ import annotations

import base64
import json
import socket

import pytest

from idlegate.integrations.airflow import AirflowAuth, AirflowClient, AirflowError, HttpAnswer
from idlegate.sim.airflow import (
    AirflowRefusal,
    AirflowRefusalReason,
    LeftReason,
    airflow_runs,
    map_dag,
)
from tests.airflow_data import PASSWORD, SESSIONS, TOKEN, examples, replaying, session

ADMIN = AirflowAuth(username="admin", password=PASSWORD)


def _export(dag: str, auth: AirflowAuth = ADMIN) -> dict:
    with replaying(session(dag)) as url:
        client = AirflowClient(url, auth)
        assert (client.api, client.version()) == ("v2", "3.1.3")
        return client.dag_export(dag, runs=3)


@pytest.mark.parametrize("dag", [s for s in SESSIONS if s != "example_time_delta_sensor_async"])
def test_the_priorities_are_the_ones_airflow_gave_the_task_instances(dag):
    # the downstream weight rule computed from the DAG's tasks alone, against Airflow's own
    # priority_weight of every task instance it ran
    export = _export(dag)
    computed = {s.task_id: s.priority for s in map_dag(export).stages}
    airflows = {ti["task_id"]: ti["priority_weight"] for ti in export["task_instances"]}
    assert export["task_instances"] and computed
    assert {t: airflows[t] for t in computed if t in airflows} == {
        t: p for t, p in computed.items() if t in airflows
    }


def test_a_mapped_tasks_runs_give_its_size_and_the_estimates_of_the_next_runs():
    export = _export("example_dynamic_task_mapping")
    found = airflow_runs(export)
    assert len(found.runs) == 3 and found.left_out == []
    first, second, third = found.runs
    assert [(s.task_id, s.tasks, s.tasks_known) for s in first.job.stages] == [
        ("add_one", 3, True),
        ("sum_it", 1, True),
    ]
    assert [len(m) for m in first.measured] == [3, 1]
    # each run's estimates are the mean durations of the runs before it
    before = [d for m in (first.measured[0], second.measured[0]) for d in m]
    assert third.job.stage("add-one").duration == pytest.approx(sum(before) / len(before))
    assert all(r.outcome == "Succeeded" and r.jct > 0 for r in found.runs)


def test_a_branch_run_leaves_the_branches_it_skipped_out():
    export = _export("example_branch_operator")
    job = map_dag(export)
    assert {t.reason for t in job.left} == {LeftReason.NO_POD}  # the EmptyOperators
    for run in airflow_runs(export).runs:
        ran = {s.task_id for s in run.job.live_stages}
        # of branch_a..d one is followed, per run; the branching tasks always run
        assert len(ran & {"branch_a", "branch_b", "branch_c", "branch_d"}) == 1
        assert {"branching", "branching_ext_python", "branching_venv"} <= ran


def test_the_example_set_maps_or_is_left_to_airflow_with_a_reason():
    found = {}
    for dag, export in examples().items():
        try:
            job = map_dag(export)
            found[dag] = job.counts
        except AirflowRefusal as exc:
            found[dag] = exc.reason
    assert len(found) == 81
    refused = {d: r for d, r in found.items() if isinstance(r, AirflowRefusalReason)}
    assert refused == {
        "example_branch_labels": AirflowRefusalReason.NO_TASKS,
        "example_external_task_marker_child": AirflowRefusalReason.NO_TASKS,
        "example_external_task_marker_parent": AirflowRefusalReason.NO_TASKS,
        "example_time_delta_sensor_async": AirflowRefusalReason.NO_TASKS,
        "example_workday_timetable": AirflowRefusalReason.NO_TASKS,
    }
    assert found["example_complex"] == {"stages": 37, "edges": 59, "tasks": 37}
    assert found["example_kubernetes_executor"] == {"stages": 6, "edges": 6, "tasks": 6}
    sensors = map_dag(examples()["example_sensors"]).left
    assert len(sensors) == 13 and {t.reason for t in sensors} == {LeftReason.SENSOR}


def test_a_token_is_sent_as_is():
    assert _export("tutorial", AirflowAuth(token=TOKEN))["dag"]["dag_id"] == "tutorial"


@pytest.mark.parametrize(
    ("auth", "words"),
    [
        (AirflowAuth(username="admin", password="wrong"), "refused the user name and password"),
        (AirflowAuth(token="stale"), "refused the token for /api/v2/dags/tutorial/details"),
        (AirflowAuth(), "asks who is asking"),
        (AirflowAuth(username="admin"), "without a password"),
    ],
)
def test_credentials_airflow_refuses_are_a_clear_error(auth, words):
    with pytest.raises(AirflowError, match=words):
        _export("tutorial", auth)


def test_an_unknown_dag_and_an_unreachable_api_are_clear_errors():
    with replaying(session("tutorial")) as url, pytest.raises(AirflowError) as caught:
        AirflowClient(url, ADMIN).dag_export("no_such_dag")
    assert "has no DAG 'no_such_dag' (HTTP 404" in str(caught.value)
    with socket.socket() as free:  # a port nothing listens on once closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(AirflowError, match=r"cannot reach Airflow's API at http://127\.0\.0\.1"):
        AirflowClient(f"http://127.0.0.1:{port}", ADMIN).dag_export("tutorial")
    with pytest.raises(AirflowError, match="--url must be the address"):
        AirflowClient("airflow:8080")


def test_a_server_that_is_no_airflow_is_said_so():
    nothing = replaying({}, guard=False)  # 404 to every request
    with nothing as url, pytest.raises(AirflowError, match="is no Airflow API server"):
        AirflowClient(url, ADMIN).dag_export("tutorial")


def test_a_deferrable_sensor_seen_in_its_run_leaves_nothing_to_schedule():
    export = _export("example_time_delta_sensor_async")
    with pytest.raises(AirflowRefusal) as caught:
        map_dag(export)
    assert caught.value.reason is AirflowRefusalReason.NO_TASKS
    assert "wait (sensor)" in str(caught.value) and "finish (no-pod)" in str(caught.value)


def test_airflow_2_is_asked_at_api_v1_with_basic_auth():
    # an Airflow 2 answers /api/v1 only; the recorded bodies stand in for its answers
    recorded = session("example_dynamic_task_mapping")
    sent: list[tuple[str, str, str]] = []

    def airflow_2(method: str, url: str, body: bytes | None, headers: dict) -> HttpAnswer:
        path = url.split("127.0.0.1", 1)[1]
        sent.append((method, path, headers.get("Authorization", "")))
        if path.startswith("/api/v2") or method == "POST":
            return HttpAnswer(404, b'{"detail": "Not Found"}')
        path = path.replace("/api/v1", "/api/v2").replace("-execution_date", "-run_after")
        found = recorded.get(f"GET {path}", {"status": 404, "body": {"detail": "Not Found"}})
        return HttpAnswer(found["status"], json.dumps(found["body"]).encode())

    client = AirflowClient("http://127.0.0.1", ADMIN, transport=airflow_2)
    export = client.dag_export("example_dynamic_task_mapping", runs=3)
    assert client.api == "v1" and len(airflow_runs(export).runs) == 3
    basic = "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    assert all(auth == basic for _, path, auth in sent if "/version" not in path)
    assert not any(method == "POST" for method, _, _ in sent)
    assert any("order_by=-execution_date" in path for _, path, _ in sent)
