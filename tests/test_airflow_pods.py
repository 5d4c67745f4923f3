"""Airflow's worker pods read as task tries, gated at creation, and released before Airflow's
pending timeout: on pods made by Airflow 3.1.3's own PodGenerator
(tests/data/airflow/worker-pods.json, written by benchmarks/airflow_worker_pods.py)."""

from __future__ import annotations

import copy
import json

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE
from idlegate.errors import IdlegateError
from idlegate.integrations.airflow_pods import (
    AirflowPod,
    QueuedTimeout,
    TaskTry,
    TimeoutSettingError,
    gates_with_ours,
    is_worker_pod,
)
from tests.airflow_data import DATA

RUN = "manual__2026-11-25T00:41:16.996181+00:00"


def _pods() -> list[dict]:
    return json.loads((DATA / "worker-pods.json").read_text())


def test_a_worker_pod_names_its_task_try_unsanitised():
    plain, mapped, grouped = (AirflowPod.of(p) for p in _pods())
    # the labels' run id lost its colons and plus to Airflow's sanitiser: the annotation is read
    assert plain.task_try == TaskTry("example_dynamic_task_mapping", RUN, "sum_it", -1, 1)
    assert mapped.task_try == TaskTry("example_dynamic_task_mapping", RUN, "add_one", 2, 1)
    assert grouped.task_try.task_id == "section_1.task_2"
    assert grouped.dag_run == ("example_task_group", "scheduled__2026-11-25T00:00:00+00:00")
    assert str(mapped.task_try) == f"example_dynamic_task_mapping/{RUN}/add_one[2] try 1"
    assert (plain.phase, plain.gated, plain.executor, plain.problem) == (
        "Pending",
        False,
        None,
        None,
    )


def test_a_pod_with_airflows_labels_but_no_run_says_why_it_is_left_to_airflow():
    pod = _pods()[1]
    del pod["metadata"]["annotations"]["run_id"]
    read = AirflowPod.of(pod)
    # the run id's label is sanitised ("...T004116.9961810000-4b43d31e2"): never read as the id
    assert (read.dag_id, read.task_id, read.map_index, read.try_number) == (
        "example_dynamic_task_mapping",
        "add_one",
        2,
        1,
    )
    assert read.run_id is None and read.dag_run is None
    assert "no run_id annotation" in read.problem and "left to Airflow" in read.problem
    with pytest.raises(IdlegateError, match="names no DAG run"):
        _ = read.task_try


def test_only_the_executors_worker_pods_are_read_and_gated():
    pod = _pods()[0]
    assert is_worker_pod(pod) and AirflowPod.of(pod) is not None
    kpo = copy.deepcopy(pod)  # the KubernetesPodOperator's pods: dag_id, but no airflow-worker
    del kpo["metadata"]["labels"]["airflow-worker"]
    other = {"metadata": {"name": "x", "labels": {"app": "y"}}, "spec": {}}
    for pod_ in (kpo, other, {}):
        assert not is_worker_pod(pod_) and AirflowPod.of(pod_) is None
        assert gates_with_ours(pod_) is None


def test_the_webhook_appends_idlegates_gate_once():
    pod = _pods()[0]
    pod["spec"]["schedulingGates"] = [{"name": "someone.else/gate"}]
    gates = gates_with_ours(pod)
    assert gates == [{"name": "someone.else/gate"}, {"name": GATE}]
    pod["spec"]["schedulingGates"] = gates
    assert gates_with_ours(pod) is None  # (a webhook called twice changes nothing)
    read = AirflowPod.of(pod)
    assert read.gated
    pod["metadata"]["annotations"][ANNOTATION_EXECUTOR] = "3"
    pod["status"] = {"phase": "Succeeded"}
    read = AirflowPod.of(pod)
    assert (read.executor, read.terminal) == (3, True)


def test_a_gated_pod_is_released_the_margin_before_airflows_queued_timeout():
    pod = _pods()[0]
    pod["metadata"]["creationTimestamp"] = "2026-11-25T00:00:00Z"
    read = AirflowPod.of(pod)
    timeout = QueuedTimeout(timeout=600, margin=120)
    assert timeout.deadline(read, now=0.0) == read.created + 480
    message = timeout.released_message(read, read.created + 480)
    assert "waited 480 s" in message and "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT" in message
    # the task instance's queued_when, when known and earlier: the executor's lag counts
    assert timeout.deadline(read, now=0.0, queued=read.created - 30) == read.created + 450
    # a pod whose creation is not recorded: from when it was seen
    del pod["metadata"]["creationTimestamp"]
    assert timeout.deadline(AirflowPod.of(pod), now=50.0) == 530.0


@pytest.mark.parametrize(("timeout", "margin"), [(600, 600), (100, 300), (0, 0), (600, -1)])
def test_a_margin_that_leaves_no_wait_is_refused_with_the_setting_to_raise(timeout, margin):
    with pytest.raises(TimeoutSettingError, match="AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT"):
        QueuedTimeout(timeout=timeout, margin=margin)


def test_a_pod_names_its_stage_and_task_instance_and_its_own_run_time():
    plain, mapped, _ = (AirflowPod.of(p) for p in _pods())
    assert (plain.stage_key, plain.task_key, plain.run_key) == ("sum_it", "sum_it", "sum_it")
    assert (mapped.stage_key, mapped.task_key) == ("add_one", "add_one[2]")
    pod = _pods()[1]
    ended = {"startedAt": "2026-11-25T00:00:10Z", "finishedAt": "2026-11-25T00:00:52Z"}
    pod["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "base", "state": {"terminated": ended}}],
    }
    assert AirflowPod.of(pod).ran == 42.0
    pod["status"]["phase"] = "Running"
    assert AirflowPod.of(pod).ran is None
