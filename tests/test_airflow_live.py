"""The job of a live DAG run (`LiveDags`), on answers recorded from Airflow 3.1.3 replayed over
HTTP: a new run of a recorded DAG (its task instances queued, as when its pods appear), its
estimates from the recorded runs, one DAG's structure asked once, a DAG that changed
between runs, and the bad input that leaves a run's pods to Airflow."""

from __future__ import annotations

import copy
import json
import socket
import urllib.parse
from collections import Counter
from datetime import UTC, datetime

import pytest

from idlegate.integrations.airflow import (
    DEFAULT_RUNS,
    AirflowAuth,
    AirflowClient,
    urllib_transport,
)
from idlegate.integrations.airflow_live import LiveDags, LiveRefusal, place, run_version
from idlegate.integrations.airflow_pods import AirflowPod
from idlegate.sim.airflow import LeftTask
from idlegate.sim.external import DurationSource
from tests.airflow_data import PASSWORD, replaying, session

ADMIN = AirflowAuth(username="admin", password=PASSWORD)
LIVE = "manual__2026-11-25T03:00:00.000000+00:00"
MAPPING = "example_dynamic_task_mapping"


def _runs(answers: dict, dag: str) -> list[dict]:
    return next(v["body"]["dag_runs"] for k, v in answers.items() if f"{dag}/dagRuns?" in k)


def _path(dag: str, run: str) -> str:
    return f"GET /api/v2/dags/{dag}/dagRuns/{urllib.parse.quote(run, safe='')}"


def with_live_run(answers: dict, dag: str, run_id: str = LIVE, **changes: object) -> dict:
    """`answers` and a new run of `dag` as Airflow answers for it while it runs: the newest
    recorded run's task instances under `run_id`, queued. Each recorded run answers
    ``GET .../dagRuns/{run_id}`` too (the list's item, as Airflow gives it)."""
    answers = copy.deepcopy(answers)
    runs = _runs(answers, dag)
    for key in [k for k in answers if f"{dag}/dagRuns?" in k and "limit=3&" in k]:
        # (the recording asked for 3 runs; the DAG has no more, so 25 gives the same 3)
        answers[key.replace("limit=3&", f"limit={DEFAULT_RUNS}&")] = answers[key]
    for run in runs:
        answers[_path(dag, run["dag_run_id"])] = {"status": 200, "body": run}
    newest = runs[0]["dag_run_id"]
    run = {**copy.deepcopy(runs[0]), "dag_run_id": run_id, "state": "running", **changes}
    run["queued_at"] = "2026-11-25T03:00:00Z"
    recorded = answers[f"{_path(dag, newest)}/taskInstances?limit=100&offset=0"]["body"]
    instances = copy.deepcopy(recorded["task_instances"])
    for ti in instances:
        ti.update(dag_run_id=run_id, state="queued", duration=None, end_date=None)
    answers[_path(dag, run_id)] = {"status": 200, "body": run}
    body = {"task_instances": instances, "total_entries": len(instances)}
    answers[f"{_path(dag, run_id)}/taskInstances?limit=100&offset=0"] = {
        "status": 200,
        "body": body,
    }
    return answers


class Counting:
    """A transport over the network that counts the requests by path."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()
        self.send = urllib_transport()

    def __call__(self, method, url, body, headers):
        self.asked[urllib.parse.urlparse(url).path] += 1
        return self.send(method, url, body, headers)


def _earlier_mean(answers: dict, task: str) -> float:
    found = [
        ti["duration"]
        for k, v in answers.items()
        if k.endswith("/taskInstances?limit=100&offset=0") and LIVE not in urllib.parse.unquote(k)
        for ti in v["body"]["task_instances"]
        if ti["task_id"] == task and ti["state"] == "success"
    ]
    return sum(found) / len(found)


def test_a_live_runs_job_is_its_dag_with_estimates_from_the_earlier_runs():
    answers = with_live_run(session(MAPPING), MAPPING)
    with replaying(answers) as url:
        found = LiveDags(AirflowClient(url, ADMIN), runs=3).run(MAPPING, LIVE, now=0.0)
    add_one, sum_it = found.job.stages
    assert (add_one.task_id, add_one.tasks, add_one.tasks_known) == ("add_one", 3, True)
    assert add_one.duration_source is DurationSource.HISTORY
    assert add_one.duration == pytest.approx(_earlier_mean(answers, "add_one"))
    assert sum_it.duration == pytest.approx(_earlier_mean(answers, "sum_it"))
    assert found.job.run_id == LIVE and found.notes == ()
    assert found.arrival == datetime(2026, 11, 25, 3, tzinfo=UTC).timestamp()
    assert found.stage_of("add_one") is add_one and found.stage_of("nope") is None
    # when Airflow queued each task try: its pending timeout's start
    recorded = {
        (ti["task_id"], ti["map_index"], ti["try_number"]): ti["queued_when"]
        for ti in answers[f"{_path(MAPPING, LIVE)}/taskInstances?limit=100&offset=0"]["body"][
            "task_instances"
        ]
    }
    assert (
        found.queued.keys()
        == recorded.keys()
        == {
            ("add_one", 0, 1),
            ("add_one", 1, 1),
            ("add_one", 2, 1),
            ("sum_it", -1, 1),
        }
    )
    when = datetime.fromisoformat(recorded["sum_it", -1, 1]).timestamp()
    assert found.queued["sum_it", -1, 1] == when


def test_a_task_left_to_airflow_says_why():
    dag = "example_branch_operator"
    answers = with_live_run(session(dag), dag)
    with replaying(answers) as url:
        found = LiveDags(AirflowClient(url, ADMIN), runs=3).run(dag, LIVE, now=0.0)
    left = found.stage_of("join")
    assert isinstance(left, LeftTask) and "without a pod" in left.message


def test_a_dags_structure_and_history_are_asked_once_per_dag():
    answers = with_live_run(session(MAPPING), MAPPING)
    answers = with_live_run(answers, MAPPING, run_id="manual__second")
    counting = Counting()
    with replaying(answers) as url:
        dags = LiveDags(AirflowClient(url, ADMIN, transport=counting), runs=3, max_age=600)
        dags.run(MAPPING, LIVE, now=0.0)
        dags.run(MAPPING, "manual__second", now=10.0)
        tasks = f"/api/v2/dags/{MAPPING}/tasks"
        assert counting.asked[tasks] == 1
        assert counting.asked[f"/api/v2/dags/{MAPPING}/dagRuns/manual__second"] == 1
        dags.run(MAPPING, "manual__second", now=700.0)  # older than max_age: asked again
        assert counting.asked[tasks] == 2


def _renamed(answers: dict, dag: str, old: str, new: str, version: str) -> dict:
    """`answers` with the DAG as it is after a change: task `old` renamed `new`, a new
    latest version."""
    answers = copy.deepcopy(answers)
    for key, value in answers.items():
        body = value["body"]
        if key.endswith(f"/dags/{dag}/tasks"):
            for task in body["tasks"]:
                task["task_id"] = new if task["task_id"] == old else task["task_id"]
                task["downstream_task_ids"] = [
                    new if d == old else d for d in task["downstream_task_ids"]
                ]
        if key.endswith(f"/dags/{dag}/details"):
            body["latest_dag_version"] = {**body["latest_dag_version"], "id": version}
    return answers


@pytest.mark.parametrize("versioned", [True, False])
def test_a_dag_that_changed_between_runs_is_read_again(versioned):
    # versioned: Airflow 3 names the run's DAG version; else (Airflow 2) only its task
    # instances show the change
    before = with_live_run(session(MAPPING), MAPPING)
    with replaying(before) as url:
        dags = LiveDags(AirflowClient(url, ADMIN), runs=3)
        dags.run(MAPPING, LIVE, now=0.0)
    # the DAG renames sum_it to total; a new run runs the new version
    after = _renamed(before, MAPPING, "sum_it", "total", "v2")
    version = {**_runs(after, MAPPING)[0]["dag_versions"][0], "id": "v2"}
    versions = [version] if versioned else []
    after = with_live_run(after, MAPPING, run_id="manual__new", dag_versions=versions)
    key = f"{_path(MAPPING, 'manual__new')}/taskInstances?limit=100&offset=0"
    for ti in after[key]["body"]["task_instances"]:
        ti["task_id"] = "total" if ti["task_id"] == "sum_it" else ti["task_id"]
    with replaying(after) as url:
        dags.client = AirflowClient(url, ADMIN)
        found = dags.run(MAPPING, "manual__new", now=10.0)
    assert [s.task_id for s in found.job.stages] == ["add_one", "total"]
    if versioned:
        assert run_version(_runs(after, MAPPING)[0]) != found.version == "v2"
        assert "changed since its last run" in found.notes[0]
    # the renamed task has no history of its own (the earlier runs ran sum_it)
    assert found.job.stage("total").duration_source is DurationSource.PRIOR


def test_a_run_of_a_dag_that_changed_under_it_is_left_to_airflow():
    # the API describes the renamed DAG, the run still runs the old tasks
    answers = _renamed(with_live_run(session(MAPPING), MAPPING), MAPPING, "sum_it", "total", "v2")
    with replaying(answers) as url, pytest.raises(LiveRefusal) as caught:
        LiveDags(AirflowClient(url, ADMIN), runs=3).run(MAPPING, LIVE, now=0.0)
    assert caught.value.reason == "DagChanged"
    assert "ran 'sum_it', which the DAG no longer has" in str(caught.value)
    assert str(caught.value).endswith("Its pods are left to Airflow")


def test_a_pods_run_that_airflow_does_not_have_is_left_to_airflow():
    with replaying(session(MAPPING)) as url, pytest.raises(LiveRefusal) as caught:
        LiveDags(AirflowClient(url, ADMIN), runs=3).run(MAPPING, "manual__gone", now=0.0)
    assert caught.value.reason == "NoDagRun"
    assert "has no DAG run 'manual__gone' of DAG 'example_dynamic_task_mapping'" in str(
        caught.value
    )
    assert "left to Airflow" in str(caught.value)
    with replaying(session(MAPPING)) as url, pytest.raises(LiveRefusal) as caught:
        LiveDags(AirflowClient(url, ADMIN), runs=3).run("no_such_dag", LIVE, now=0.0)
    assert caught.value.reason == "NoDagRun" and "has no DAG 'no_such_dag'" in str(caught.value)


def test_an_unreachable_or_unauthorised_api_is_said_so():
    with socket.socket() as free:  # a port nothing listens on once closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    client = AirflowClient(f"http://127.0.0.1:{port}", ADMIN, api="v2")
    with pytest.raises(LiveRefusal) as caught:
        LiveDags(client).run(MAPPING, LIVE, now=0.0)
    assert caught.value.reason == "AirflowUnreachable"
    assert "cannot reach Airflow's API" in str(caught.value)
    wrong = AirflowAuth(username="admin", password="wrong")
    with replaying(session(MAPPING)) as url, pytest.raises(LiveRefusal) as caught:
        LiveDags(AirflowClient(url, wrong)).run(MAPPING, LIVE, now=0.0)
    assert caught.value.reason == "AirflowUnauthorized"
    assert "refused the user name and password" in str(caught.value)
    # the operator's client names the operator's flags, never the history command's
    with replaying(session(MAPPING)) as url, pytest.raises(LiveRefusal) as caught:
        LiveDags(AirflowClient(url, wrong, flags="--airflow-")).run(MAPPING, LIVE, now=0.0)
    said = str(caught.value)
    assert "--airflow-username" in said and "--airflow-password-file" in said
    assert " --username" not in said and "(--username" not in said


def test_the_recorded_runs_answer_for_themselves_as_airflow_does():
    # (the single-run answers the tests derive are the list's items: Airflow's one shape)
    answers = with_live_run(session(MAPPING), MAPPING)
    recorded = _runs(answers, MAPPING)[1]
    assert json.dumps(answers[_path(MAPPING, recorded["dag_run_id"])]["body"]) == json.dumps(
        recorded
    )


def test_a_runs_stages_are_keyed_by_the_task_ids_its_pods_carry():
    answers = with_live_run(session("example_task_group"), "example_task_group")
    with replaying(answers) as url:
        found = LiveDags(AirflowClient(url, ADMIN), runs=3).run("example_task_group", LIVE, 0.0)
    keys = found.job.stage_keys
    assert list(keys) == [s.name for s in found.job.spec().stages]
    assert set(keys.values()) == {s.task_id for s in found.job.stages}
    assert all("." in key or "_" in key for key in keys.values())  # (group.task ids)


def _pod(task: str, index: int = -1, run: str = LIVE, dag: str = MAPPING) -> AirflowPod:
    notes = {"dag_id": dag, "run_id": run, "task_id": task, "try_number": "1"}
    if index >= 0:
        notes["map_index"] = str(index)
    labels = {"airflow-worker": "1", "kubernetes_executor": "True"}
    return AirflowPod.of({"metadata": {"name": task, "labels": labels, "annotations": notes}})


def test_each_pod_of_a_run_is_scheduled_asked_again_or_left_to_airflow():
    answers = with_live_run(session(MAPPING), MAPPING)
    with replaying(answers) as url:
        run = LiveDags(AirflowClient(url, ADMIN), runs=3).run(MAPPING, LIVE, now=0.0)
    assert place(run, _pod("sum_it")).action == "schedule"
    assert place(run, _pod("add_one", 2)).action == "schedule"
    # index 3 of a task the run expanded to 3: Airflow expanded it since; then, an error
    assert place(run, _pod("add_one", 3)).action == "remap"
    released = place(run, _pod("add_one", 3), remapped=True)
    assert (released.action, released.reason) == ("release", "DagChanged")
    # a task the DAG does not have: asked again, then left to Airflow
    assert place(run, _pod("renamed")).action == "remap"
    released = place(run, _pod("renamed"), remapped=True)
    assert (released.action, released.reason) == ("release", "DagChanged")
    assert "changed under the run" in released.message
    # a pod with Airflow's labels but no run
    labels = {"airflow-worker": "1", "kubernetes_executor": "True"}
    nameless = AirflowPod.of({"metadata": {"name": "x", "labels": labels}})
    found = place(run, nameless)
    assert (found.action, found.reason) == ("release", "NoDagRun")


def test_a_pod_of_a_task_left_to_airflow_is_released_with_its_reason():
    dag = "example_branch_operator"
    answers = with_live_run(session(dag), dag)
    with replaying(answers) as url:
        run = LiveDags(AirflowClient(url, ADMIN), runs=3).run(dag, LIVE, now=0.0)
    found = place(run, _pod("join", dag=dag))
    assert (found.action, found.reason) == ("release", "LeftToAirflow")
    assert "marked done by Airflow without a pod" in found.message


def test_the_tasks_airflow_says_succeeded_stand_in_for_their_deleted_pods():
    answers = with_live_run(session(MAPPING), MAPPING)
    key = f"{_path(MAPPING, LIVE)}/taskInstances?limit=100&offset=0"
    for ti in answers[key]["body"]["task_instances"]:
        if ti["task_id"] == "add_one" and ti["map_index"] in (0, 1):
            ti["state"] = "success"
    with replaying(answers) as url:
        run = LiveDags(AirflowClient(url, ADMIN), runs=3).run(MAPPING, LIVE, now=0.0)
    # add_one[1]'s pod is still there, add_one[0]'s is gone (Airflow deleted it)
    done = run.done_pods("airflow", [_pod("add_one", 1), _pod("sum_it")])
    assert [(p.task_key, p.phase, p.gated, p.stage_key, p.problem) for p in done] == [
        ("add_one[0]", "Succeeded", False, "add_one", None)
    ]
