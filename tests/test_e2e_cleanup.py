"""Cleanup, deadlines and suspend end to end: the real kopf operator against the emulated API
server and kubelet (tests/e2e.py), the clock and the kubelet 20 times faster than the wall.

* a burst under pod GC and a TTL: every pod is collected while the workflows still exist,
  then every workflow is deleted by its TTL, and the history sink has every one of them;
* a deadline mid-stage: the workflow fails with DeadlineExceeded, its running and gated
  pods are deleted and its executors go to the next workflow;
* suspend at creation and mid-run, and resume: nothing runs while suspended, the evicted
  tasks run again, every task succeeds once;
* a restart between a workflow's finish and its TTL: deleted once, not before its time.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import kmock
import pytest

from idlegate.sim.history import load_history
from idlegate.sim.timestamps import from_datetime
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    SPEED,
    Journal,
    events_of,
    holding_first_runs,
    pods_of,
    running_operator,
    stage,
    status_of,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.harness import ApiServer

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads (or processes) of their own; why: tests/e2e.py,
# at SPEED.

pytest.importorskip("kopf", reason="the operator extra (kopf) is not installed")


def condition(api: ApiServer, ns: str, name: str, type_: str) -> dict | None:
    found = [c for c in status_of(api, ns, name).get("conditions", []) if c["type"] == type_]
    return found[0] if found else None


def test_a_burst_leaves_no_pod_then_no_workflow_and_a_complete_history(
    api, ns, kubelet, monitor, tmp_path: Path
):
    sink = tmp_path / "history.jsonl"
    names = [f"b{i}" for i in range(12)]
    # The order of the writes is what is checked (the journal), not what a poll finds at some
    # moment: on a slow machine the first workflows' TTL ends before the last ones finish.
    with (
        Journal(api, ns) as journal,
        running_operator(
            api, ns, pool=4, history_file=sink, pod_gc="OnWorkflowCompletion", ttl_after_finished=60
        ),
    ):
        for i, name in enumerate(names):
            body = workflow(name, stage("a", 2, 2), stage("b", 1, 2, ("a",)))
            if i % 2:  # half collect each pod as it ends, the rest take the operator's default
                body["spec"]["podGC"] = {"strategy": "OnPodCompletion"}
            api.create(DWF, body, namespace=ns)
        deleted = {n: lambda n=n: journal.index("dagworkflows", n, "DELETED") for n in names}
        wait(lambda: all(d() is not None for d in deleted.values()), 60, "the TTL's deletions")
        assert api.list("pods", ns) == [] and api.list(DWF, ns) == []
    for name in names:
        end = journal.index("dagworkflows", name, phase="Succeeded")
        assert end is not None and end < deleted[name](), name  # finished, then deleted
        pods = journal.pods_of(name)
        assert pods == {f"{name}-a-0", f"{name}-a-1", f"{name}-b-0"}
        gone = [journal.index("pods", pod, "DELETED") for pod in pods]
        # every pod collected while its workflow still existed (its TTL is 60 s)
        assert all(g is not None and g < deleted[name]() for g in gone), (name, gone)
    assert monitor.duplicates == []  # no task ran twice
    assert sorted(monitor.created) == sorted(
        f"{n}-{s}-{i}" for n in names for s, i in (("a", 0), ("a", 1), ("b", 0))
    )
    records = load_history(sink)
    assert sorted(r.name for r in records) == sorted(f"{ns}/{n}" for n in names)
    assert all(r.outcome == "Succeeded" and all(r.measured) for r in records)


def test_a_deadline_fails_the_workflow_mid_stage(api, ns, kubelet, monitor):
    # Two waves on a pool of 2: the first of 20 s; the second held running until the deadline
    # cuts it, however late it starts. The deadline leaves the first wave 180 s of slack
    # (9 wall seconds) for the operator to create and release its pods.
    kubelet.durations = holding_first_runs("slow-a-2", "slow-a-3")
    slow = workflow("slow", stage("a", 4, 20))
    slow["spec"]["activeDeadlineSeconds"] = 200
    with running_operator(api, ns, pool=2):
        api.create(DWF, slow, namespace=ns)
        wait(lambda: len(monitor.running()) == 2, 10, "the first wave")
        api.create(DWF, workflow("next", stage("x", 2, 2)), namespace=ns)
        status = wait_phase(api, ns, "slow", ("Failed",), timeout=30)
        wait_phase(api, ns, "next", ("Succeeded",), timeout=30)
    failed = condition(api, ns, "slow", "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert status["stages"][0]["succeeded"] == 2  # the first wave; the second was cut
    assert from_datetime(status["completionTime"]) - from_datetime(status["startTime"]) >= 200
    left = pods_of(api, ns, "slow")
    assert sorted(p["metadata"]["name"] for p in left) == ["slow-a-0", "slow-a-1"]
    assert all(p["status"]["phase"] == "Succeeded" for p in left)
    assert "DeadlineExceeded" in [e["reason"] for e in events_of(api, ns, "slow")]
    assert monitor.max_total <= 2


def test_suspend_and_resume(api, ns, kubelet, monitor):
    # mid's first wave runs until the suspend evicts it, however late that comes; run again
    # after the resume, its tasks take their 20 s
    kubelet.durations = holding_first_runs("mid-a-0", "mid-a-1")
    held = workflow("held", stage("a", 1, 2))
    held["spec"]["suspend"] = True
    with running_operator(api, ns, pool=2):
        api.create(DWF, held, namespace=ns)
        wait(lambda: condition(api, ns, "held", "Suspended"), 10, "the Suspended condition")
        api.create(DWF, workflow("mid", stage("a", 4, 20), stage("b", 1, 2, ("a",))), ns)
        wait(lambda: len(monitor.running()) == 2, 10, "mid's first wave")
        assert pods_of(api, ns, "held") == []
        api.patch(DWF, ns, "mid", {"spec": {"suspend": True}})
        wait(lambda: not monitor.running(), 10, "mid's running pods to be evicted")
        # (its status follows within a second: one status write a second, issue 79)
        wait(lambda: condition(api, ns, "mid", "Suspended"), 10, "mid's Suspended condition")
        suspended = condition(api, ns, "mid", "Suspended")
        assert suspended is not None and suspended["status"] == "True"
        api.patch(DWF, ns, "held", {"spec": {"suspend": False}})
        wait_phase(api, ns, "held", ("Succeeded",), timeout=20)
        time.sleep(10 / SPEED)  # mid stays out of the pool meanwhile
        assert not any(monitor.occupying.get(p) == "mid" for p in monitor.running())
        api.patch(DWF, ns, "mid", {"spec": {"suspend": False}})
        status = wait_phase(api, ns, "mid", ("Succeeded", "Failed"), timeout=30)
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0
    assert condition(api, ns, "mid", "Suspended")["reason"] == "Resumed"  # type: ignore[index]
    reasons = [e["reason"] for e in events_of(api, ns, "mid")]
    assert "Suspended" in reasons and "Resumed" in reasons
    assert monitor.max_total <= 2


def test_a_restart_between_finish_and_ttl_deletes_once_on_time(api, ns, kubelet):
    clock = ScaledClock(SPEED)  # one clock across both operator runs, as the wall is
    deletions: list[float] = []
    lock = threading.Lock()

    def on_event(res: kmock.resource, etype: str, obj: dict) -> None:
        meta = obj.get("metadata") or {}
        if etype == "DELETED" and meta.get("namespace") == ns and meta.get("name") == "short":
            with lock:
                deletions.append(clock.now())

    unsubscribe = api.call(lambda: api.emulator.subscribe(on_event))
    body = workflow("short", stage("a", 1, 2))
    # a TTL long enough (10 wall seconds) for the first operator to stop before it is due
    body["spec"]["ttlSecondsAfterFinished"] = 200
    try:
        with running_operator(api, ns, pool=1, clock=clock):
            api.create(DWF, body, namespace=ns)
            status = wait_phase(api, ns, "short", ("Succeeded",), timeout=20)
        time.sleep(20 / SPEED)  # the operator is down for 20 of the 200 s
        assert api.get(DWF, ns, "short")
        with running_operator(api, ns, pool=1, clock=clock):
            wait(lambda: deletions, 20, "the TTL's deletion")
            time.sleep(10 / SPEED)
    finally:
        api.call(unsubscribe)
    due = from_datetime(status["completionTime"]) + 200
    assert len(deletions) == 1 and deletions[0] >= due - 0.5, (deletions, due)
