"""Airflow's worker pods in the operator (operator/features/airflow.py): gated pods of a live
DAG run released under the pool and its policy, released before Airflow's pending timeout,
left to Airflow with a Warning when their run cannot be read, and a restart that releases
nothing twice. The run's answers are recorded from Airflow 3.1.3 (tests/data/airflow),
replayed over HTTP; the cluster is the operator's fakes (tests/operator_fakes.py)."""

from __future__ import annotations

import copy
import json
import socket
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE
from idlegate.operator.edge import intake
from idlegate.operator.features.airflow import POLL, RETRIES, AirflowSide, run_owner
from idlegate.policy import make_scheduler
from tests.airflow_data import DATA, PASSWORD, replaying, session
from tests.operator_fakes import FakeClock, FakeKube, FeatureHost, Harness, stage
from tests.test_airflow_live import LIVE, MAPPING, with_live_run

START = datetime(2026, 11, 25, 3, 0, 10, tzinfo=UTC).timestamp()
"""The operator's clock at the start: 10 s after the live run was queued."""


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker_pod(
    task: str, index: int = -1, *, run: str = LIVE, created: float = START, dag: str = MAPPING
) -> dict:
    """A gated worker pod of `task` in the live run, as Airflow 3.1.3 makes it (the recorded
    pod's labels and annotations) with idlegate's gate on."""
    (pod,) = [p for p in json.loads((DATA / "worker-pods.json").read_text())[:1]]
    pod = copy.deepcopy(pod)
    name = f"{task.replace('_', '-')}-{index}".replace("--1", "")
    notes = {"dag_id": dag, "run_id": run, "task_id": task, "try_number": "1"}
    if index >= 0:
        notes["map_index"] = str(index)
    pod["metadata"].update(
        name=name,
        namespace="default",
        uid=f"uid-{name}",
        annotations=notes,
        creationTimestamp=_stamp(created),
    )
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    pod["status"] = {"phase": "Pending"}
    return pod


@contextmanager
def airflow(answers: dict, tmp_path: Path, pool: int = 2, kube: FakeKube | None = None, **kw):
    """An operator with AirflowSide against the recorded Airflow: (harness, side)."""
    secret = tmp_path / "password"
    secret.write_text(PASSWORD)
    with replaying(answers) as url:
        h = Harness(
            kube or FakeKube(),
            FakeClock(START),
            pool,
            make_scheduler("fifo"),
            airflow_url=url,
            airflow_username="admin",
            airflow_password_file=secret,
            **kw,
        )
        yield h, AirflowSide(FeatureHost(h))


async def _see(h: Harness, side: AirflowSide, *names: str) -> None:
    for name in names:
        await side.pod_seen(False, copy.deepcopy(h.kube.pods[("default", name)]))
        await h.settle()


async def _advance(h: Harness, seconds: float) -> None:
    """Move the fake clock on by `seconds` and fire the timers due."""
    h.clock.advance(seconds)
    await h.timers.fire_due(h.clock.now())
    await h.settle()


def _gated(h: Harness) -> list[str]:
    return sorted(n for (_, n), p in h.kube.pods.items() if p["spec"].get("schedulingGates"))


def _events(h: Harness) -> list[tuple[str, str, str]]:
    return [(e["involvedObject"]["name"], e["type"], e["reason"]) for e in h.kube.events]


async def _finish(h: Harness, side: AirflowSide, name: str, ran: tuple[float, float]) -> None:
    pod = h.kube.pods[("default", name)]
    ended = {"startedAt": _stamp(START + ran[0]), "finishedAt": _stamp(START + ran[1])}
    pod["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [{"name": "base", "state": {"terminated": ended}}],
    }
    await _see(h, side, name)


MAPPED = ["add-one-0", "add-one-1", "add-one-2"]


def _instances_key(answers: dict) -> str:
    """The key of the live run's task instances among `answers`."""
    return next(k for k in answers if k.endswith("Instances?limit=100&offset=0") and "03%3A00" in k)


@pytest.mark.asyncio
async def test_a_runs_pods_are_released_under_the_pool_bound(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    with airflow(answers, tmp_path, pool=2) as (h, side):
        for i in range(3):
            pod = worker_pod("add_one", i)
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await side.restore()
        await _see(h, side, *MAPPED)
        assert side.note() is None  # (Airflow answers: nothing to say)
        # the pool holds two executors: one pod of the three waits at the gate
        assert len(_gated(h)) == 1 and len(h.kube.occupying()) == 2
        # the run's Events go on the run itself, not on its first pod, which Airflow deletes
        run = run_owner(("default", MAPPING, LIVE), "").name
        assert run == "example-dynamic-task-mapping.manual-2026-11-25t03-00-00.000000-00-00"
        assert (run, "Normal", "Accepted") in _events(h)
        (accepted,) = [e for e in h.kube.events if e["reason"] == "Accepted"]
        assert accepted["involvedObject"]["kind"] == "DagRun"
        released = [n for n in MAPPED if n not in _gated(h)]
        executors = {h.kube.pods["default", n]["metadata"]["annotations"][ANNOTATION_EXECUTOR]
                     for n in released}  # fmt: skip
        assert executors == {"0", "1"}
        # counted as Airflow's (not Argo's), and the run as a workflow of the pool
        value = h.bridge.core.metrics.value
        assert value("idlegate_airflow_pods_released_total", how="scheduled") == 2
        assert value("idlegate_argo_pods_released_total", how="scheduled") == 0
        assert value("idlegate_active_workflows") == 1
        assert value("idlegate_active_workflows_by_kind", kind="airflow") == 1  # (issue 60)
        await _finish(h, side, released[0], (1, 31))
        assert _gated(h) == [] and len(h.kube.occupying()) == 2


@pytest.mark.asyncio
async def test_a_pod_still_gated_at_its_deadline_is_released_with_a_warning(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    key = _instances_key(answers)
    for ti in answers[key]["body"]["task_instances"]:
        ti["queued_when"] = _stamp(START - 5)  # (queued 5 s before its pod was created)
    with airflow(answers, tmp_path, pool=1, airflow_queued_timeout=600) as (h, side):
        for i in range(2):
            pod = worker_pod("add_one", i)
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "add-one-0", "add-one-1")
        assert _gated(h) == ["add-one-1"]
        # Airflow queued it at its queued_when, before the pod existed: the deadline is
        # 600 - 120 s after that, not after the pod's creation
        queued = START - 5
        assert side.runs["default", MAPPING, LIVE].queued["add_one", 1, 1] == queued
        h.clock.t = queued + 480 - 1
        await h.timers.fire_due(h.clock.now())
        await h.settle()
        assert _gated(h) == ["add-one-1"]
        h.clock.t = queued + 480
        await h.timers.fire_due(h.clock.now())
        await h.settle()
        assert _gated(h) == []
        (warning,) = [e for e in h.kube.events if e["reason"] == "QueuedTimeout"]
        assert warning["involvedObject"]["name"] == "add-one-1"
        assert "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT" in warning["message"]
        assert side.released.labels("QueuedTimeout")._value.get() == 1
        # released beyond the pool, it counts against it once seen running
        await _see(h, side, "add-one-1")
        assert h.core.cluster.free_executors == 0


@pytest.mark.asyncio
async def test_pods_whose_run_cannot_be_read_are_left_to_airflow_saying_why(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    with airflow(answers, tmp_path) as (h, side):
        nameless = worker_pod("sum_it")
        del nameless["metadata"]["annotations"]["run_id"]
        gone = worker_pod("sum_it", run="manual__gone")
        gone["metadata"]["name"] = "gone"
        for pod in (nameless, gone):
            h.kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, "sum-it", "gone")
        assert _gated(h) == []
        assert ("sum-it", "Warning", "NoDagRun") in _events(h)
        assert ("gone", "Warning", "NoDagRun") in _events(h)
        (said,) = [e["message"] for e in h.kube.events if e["involvedObject"]["name"] == "gone"]
        assert "has no DAG run 'manual__gone'" in said and "left to Airflow" in said


@pytest.mark.asyncio
async def test_an_unreachable_airflow_leaves_the_pods_to_it(tmp_path):
    with socket.socket() as free:  # a port nothing listens on once closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    secret = tmp_path / "token"
    secret.write_text("a-token")
    h = Harness(
        FakeKube(),
        FakeClock(START),
        2,
        make_scheduler("fifo"),
        airflow_url=f"http://127.0.0.1:{port}",
        airflow_token_file=secret,
    )
    side = AirflowSide(FeatureHost(h))
    # said at the rebuild (not waited for by it), before any pod, and by /readyz (the
    # operator stays ready)
    await side.restore()
    assert side.problem is None
    await h.timers.fire_due(h.clock.now())
    assert "cannot reach Airflow's API" in (side.note() or "") and side.problem is not None
    pod = worker_pod("sum_it")
    h.kube.pods[("default", "sum-it")] = pod
    await _see(h, side, "sum-it")
    # /readyz says what is wrong once (issue 60, item 11): not that the pods go to
    # Airflow's order twice over
    said = side.note() or ""
    assert said.startswith("Airflow's API cannot be read, its pods go to its order: cannot")
    assert "left to Airflow" not in said, said
    # an API error is tried again after 5, 10 and 20 s while the pod waits; then it goes
    for delay in RETRIES:
        assert _gated(h) == ["sum-it"]
        await _advance(h, delay)
    assert _gated(h) == []
    assert ("sum-it", "Warning", "AirflowUnreachable") in _events(h)
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "AirflowUnreachable"]
    assert "--airflow-url" in said and "--url" not in said.replace("--airflow-url", "")


@pytest.mark.asyncio
async def test_a_restart_releases_nothing_twice_and_counts_what_airflow_finished(tmp_path):
    answers = with_live_run(session(MAPPING), MAPPING)
    kube = FakeKube()
    with airflow(answers, tmp_path, pool=2, kube=kube) as (h, side):
        for i in range(3):
            pod = worker_pod("add_one", i)
            kube.pods[("default", pod["metadata"]["name"])] = pod
        await _see(h, side, *MAPPED)
        released = sorted(n for n in MAPPED if n not in _gated(h))
        patches = kube.calls.count("patch_pod")
    # kill -9: a new operator finds the pods as they are; Airflow finished add_one[0] and
    # deleted its pod meanwhile
    del kube.pods["default", released[0]]
    answers = copy.deepcopy(answers)
    key = _instances_key(answers)
    for ti in answers[key]["body"]["task_instances"]:
        if ti["task_id"] == "add_one" and ti["map_index"] == int(released[0][-1]):
            ti["state"] = "success"
    with airflow(answers, tmp_path, pool=2, kube=kube) as (h, side):
        await _see(h, side, *[n for n in MAPPED if n != released[0]])
        # the running pod keeps its executor; the finished task's executor goes to the
        # pod that waited; nothing is patched twice
        assert _gated(h) == [] and len(kube.occupying()) == 2
        assert kube.calls.count("patch_pod") == patches + 1
        run = side.runs["default", MAPPING, LIVE]
        index = int(released[0][-1])
        assert run.succeeded == {(f"add_one[{index}]", "add_one", index, 1)}
        # the other two end; sum_it (after add_one) runs: the deleted pod's task counted
        for name in sorted(n for n in MAPPED if n != released[0]):
            await _finish(h, side, name, (1, 31))
        pod = worker_pod("sum_it")
        kube.pods[("default", "sum-it")] = pod
        await _see(h, side, "sum-it")
        assert _gated(h) == []


@pytest.mark.asyncio
async def test_a_rebuild_restores_airflows_released_pods_before_its_first_decision(tmp_path):
    # after a restart: one Airflow pod runs on executor 0 (released before), and a
    # DagWorkflow of two tasks waits; the pool has two executors
    answers = with_live_run(session(MAPPING), MAPPING)
    kube = FakeKube()
    running = worker_pod("add_one", 0)
    running["spec"]["schedulingGates"] = []
    running["metadata"]["annotations"][ANNOTATION_EXECUTOR] = "0"
    running["status"] = {"phase": "Running"}
    kube.pods[("default", "add-one-0")] = running
    kube.add_workflow("beside", {"stages": [stage("a", 2, 10.0)]})
    with airflow(answers, tmp_path, pool=2, kube=kube) as (h, side):
        await intake.rebuild(h.pools, restorers=[side.restore])
        await h.settle()
        # the Airflow pod holds its executor: one DagWorkflow task runs, one waits
        names = sorted(p["metadata"]["name"] for p in kube.occupying())
        assert len(names) == 2 and names[0] == "add-one-0" and names[1].startswith("beside")


@pytest.mark.asyncio
async def test_a_run_airflow_says_ended_keeps_its_executors_until_its_pods_end(tmp_path):
    # Airflow marks a run done once its last task reports, while the task's pod still
    # tears down: that pod's executor is not free until the pod ends
    answers = with_live_run(session(MAPPING), MAPPING)
    run = f"GET /api/v2/dags/{MAPPING}/dagRuns/{LIVE.replace(':', '%3A').replace('+', '%2B')}"
    kube = FakeKube()
    with airflow(answers, tmp_path, pool=1, kube=kube) as (h, side):
        kube.pods[("default", "add-one-0")] = worker_pod("add_one", 0)
        await _see(h, side, "add-one-0")
        assert _gated(h) == []  # it runs on the pool's one executor
        answers[run]["body"]["state"] = "success"
        kube.add_workflow("beside", {"stages": [stage("a", 1, 10.0)]})
        h.admit(kube.workflows["default", "beside"])
        await h.settle()
        h.clock.advance(POLL)
        await h.timers.fire_due(h.clock.now())
        await h.settle()
        assert [p["metadata"]["name"] for p in kube.occupying()] == ["add-one-0"]
        await _finish(h, side, "add-one-0", (1, 61))
        names = [p["metadata"]["name"] for p in kube.occupying()]
        assert len(names) == 1 and names[0].startswith("beside")
        assert ("default", MAPPING, LIVE) not in side.runs
