"""Unit tests of the operator's bridge (operator/edge/bridge.py) against the in-memory fakes of
tests/operator_fakes.py: a fake clock, timers fired by hand, an API that applies creations,
JSON patches and status merges the way the API server does, and the test as the kubelet.
"""

from __future__ import annotations

import asyncio
import copy

import pytest

from idlegate.api.labels import ANNOTATION_EXECUTOR, GATE, LABEL_WORKFLOW
from idlegate.api.task_pods import pod_name
from idlegate.operator.core.events import Forget, PodSeen
from idlegate.operator.edge import intake
from idlegate.operator.edge.kube import ApiError
from idlegate.sim.timestamps import from_datetime
from tests.helpers import CappedFifo
from tests.operator_fakes import FakeClock, FakeKube, Harness, IdleRootsOnce, harness, stage

pytestmark = [pytest.mark.looptime, pytest.mark.asyncio]

DIAMOND = {
    "stages": [
        stage("a"),
        stage("b", 2, deps=("a",)),
        stage("c", 1, deps=("a",)),
        stage("d", deps=("b", "c")),
    ]
}


# -- tests -------------------------------------------------------------------------------------


async def test_diamond_runs_stage_by_stage_and_reports_its_jct():
    h = harness(pool=2)
    start = h.clock.now()
    await h.submit("dia", DIAMOND)
    # only the root's pod exists, and it is released; the other stages are not created yet
    assert sorted(p["metadata"]["name"] for p in h.kube.pods_of("dia")) == ["dia-a-0"]
    assert h.released() == ["dia-a-0"]
    pod = h.kube.pods[("default", "dia-a-0")]
    assert pod["metadata"]["annotations"][ANNOTATION_EXECUTOR] in ("0", "1")
    assert (
        pod["metadata"]["ownerReferences"][0]["uid"]
        == h.kube.workflows[("default", "dia")]["metadata"]["uid"]
    )
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        "TASK_DURATION_SECONDS": "10",
        "TASK_INDEX": "0",
        "STAGE_NAME": "a",
        "WORKFLOW_NAME": "dia",
    }
    status = h.kube.status("dia")
    assert status["phase"] == "Running" and status["stagesSummary"] == "0/4"
    await h.finish("dia-a-0", after=10)
    # b (2 tasks) and c (1 task) are runnable: their pods are created; the pool holds 2
    assert len(h.kube.pods_of("dia")) == 4
    assert len(h.released()) == 2
    await h.run_to_completion()
    status = h.kube.status("dia")
    assert status["phase"] == "Succeeded"
    assert status["stagesSummary"] == "4/4"
    assert status["jctSeconds"] == pytest.approx(h.clock.now() - start)
    assert status["jctSeconds"] == pytest.approx(40.0)  # a, then b+c on 2 executors, then d
    assert from_datetime(status["startTime"]) == pytest.approx(start)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Valid"]["status"] == "True"
    assert conditions["Complete"]["status"] == "True"
    assert conditions["Running"]["status"] == "False"
    assert all(c["observedGeneration"] == 1 for c in status["conditions"])
    assert [s["succeeded"] for s in status["stages"]] == [1, 2, 1, 1]
    assert len(h.kube.pods_of("dia")) == 5  # one pod per task, no duplicates
    assert h.max_occupying <= 2
    assert "Accepted" in h.kube.reasons("dia") and "Succeeded" in h.kube.reasons("dia")
    assert (
        h.metrics.value("idlegate_workflow_completion_time_seconds_count", result="succeeded") == 1
    )
    assert h.bridge.core.workflows == {}  # finished workflows leave the operator's memory


async def test_a_large_stage_gets_its_pods_in_a_window_not_all_at_once():
    h = harness(pool=2)
    await h.submit("wide", {"stages": [stage("s", tasks=10, duration=1)]})
    names = sorted(p["metadata"]["name"] for p in h.kube.pods_of("wide"))
    # 2 released + at most 2 gated ahead (the window is the pool size)
    assert len(names) == 4
    gated = [p for p in h.kube.pods_of("wide") if p["spec"].get("schedulingGates")]
    assert len(gated) == 2 and all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in gated)
    await h.run_to_completion()
    assert len(h.kube.pods_of("wide")) == 10
    assert h.kube.status("wide")["phase"] == "Succeeded"
    assert h.max_occupying <= 2


async def test_the_executor_continues_with_the_next_task_of_its_stage():
    h = harness(pool=1)
    await h.submit("seq", {"stages": [stage("s", tasks=3, duration=5)]})
    first = h.kube.pods[("default", "seq-s-0")]
    executor = first["metadata"]["annotations"][ANNOTATION_EXECUTOR]
    await h.finish("seq-s-0", after=5)
    second = h.kube.pods[("default", "seq-s-1")]
    assert not second["spec"].get("schedulingGates")
    assert second["metadata"]["annotations"][ANNOTATION_EXECUTOR] == executor
    assert "Released" in h.kube.reasons("seq")


async def test_caps_hold_per_workflow_and_the_pool_overall():
    h = harness(pool=3, scheduler=CappedFifo(2))
    await h.submit("x", {"stages": [stage("s", tasks=5, duration=1)]})
    await h.submit("y", {"stages": [stage("s", tasks=5, duration=1)]})
    assert len(h.released("x")) == 2 and len(h.released("y")) == 1
    assert h.kube.status("x")["parallelismCap"] == 2
    per_workflow_max = {"x": 0, "y": 0}
    for _ in range(40):
        running = h.released()
        if not running:
            break
        for wf in per_workflow_max:
            per_workflow_max[wf] = max(per_workflow_max[wf], len(h.released(wf)))
        await h.finish(running[0], after=1)
    assert per_workflow_max == {"x": 2, "y": 2}
    assert h.max_occupying <= 3
    assert h.kube.status("x")["phase"] == h.kube.status("y")["phase"] == "Succeeded"


async def test_an_idle_slot_is_persisted_before_it_starts_evented_and_released_by_its_timer():
    h = harness(pool=2, scheduler=IdleRootsOnce(delay=7))
    t0 = h.clock.now()
    await h.submit("late", {"stages": [stage("a", duration=3)]})
    status = h.kube.status("late")
    assert status["idleSlots"] == [
        {
            "stage": "a",
            "delaySeconds": 7.0,
            "releaseTime": status["idleSlots"][0]["releaseTime"],
            "released": False,
            "reason": "policy idle-roots held the stage back for 7 s, parallelism cap 2",
        }
    ]
    assert from_datetime(status["idleSlots"][0]["releaseTime"]) == pytest.approx(t0 + 7)
    assert status["idleInsertedSeconds"] == 7
    assert h.released() == []  # held back; its pod is gated
    assert h.kube.pods[("default", "late-a-0")]["spec"]["schedulingGates"] == [{"name": GATE}]
    idle = [e for e in h.kube.events if e["reason"] == "IdleSlot"]
    assert len(idle) == 1 and "7 s" in idle[0]["message"] and "idle-roots" in idle[0]["message"]
    running = {c["type"]: c for c in status["conditions"]}["Running"]
    assert running["reason"] == "IdleSlot"
    assert next(iter(h.timers.armed.values()))[0] == pytest.approx(t0 + 7)
    h.clock.advance(7)
    assert await h.timers.fire_due(h.clock.now()) == 1
    await h.settle()
    assert h.released() == ["late-a-0"]
    assert h.kube.status("late")["idleSlots"][0]["released"] is True
    assert "IdleSlotEnded" in h.kube.reasons("late")
    await h.finish("late-a-0", after=3)
    assert h.kube.status("late")["jctSeconds"] == pytest.approx(10)
    assert h.metrics.value("idlegate_idle_inserted_seconds_total") == 7
    assert h.metrics.value("idlegate_decisions_total", kind="idle") == 1


async def test_restart_rebuilds_without_duplicates_and_honours_a_pending_delay_once():
    kube, clock = FakeKube(), FakeClock()
    first = Harness(kube, clock, 3, IdleRootsOnce(delay=20))
    await first.submit(
        "run", {"stages": [stage("a", tasks=2, duration=10), stage("b", deps=("a",))]}
    )
    # "run" idles first; let it go, then start its tasks and stop mid-way
    clock.advance(20)
    await first.timers.fire_due(clock.now())
    await first.settle()
    await first.submit("wait", {"stages": [stage("a", duration=5)]})  # held 20 s from now
    release_at = from_datetime(kube.status("wait")["idleSlots"][0]["releaseTime"])
    await first.finish("run-a-0", after=4)
    before = {n: copy.deepcopy(p) for n, p in kube.pods.items()}
    executors = {
        p["metadata"]["name"]: p["metadata"]["annotations"][ANNOTATION_EXECUTOR]
        for p in kube.occupying()
    }
    assert executors  # something is running on the old operator's executors
    # the operator dies (nothing is written on the way out) and a new one starts
    clock.advance(3)
    second = Harness(kube, clock, 3, IdleRootsOnce(delay=20))
    await intake.rebuild(second.pools)
    await second.settle()
    assert set(kube.pods) == set(before)  # no pod created twice, none lost
    assert {
        p["metadata"]["name"]: p["metadata"]["annotations"][ANNOTATION_EXECUTOR]
        for p in kube.occupying()
    } == executors
    # the pending delay is re-armed at its persisted time, not started again
    assert [at for at, _ in second.timers.armed.values()] == [pytest.approx(release_at)]
    assert second.metrics.value("idlegate_decisions_total", kind="idle") == 0
    await second.run_to_completion()
    for name in ("run", "wait"):
        status = kube.status(name)
        assert status["phase"] == "Succeeded"
        assert len(status["idleSlots"]) == 1 and status["idleSlots"][0]["released"]
        assert status["idleInsertedSeconds"] == 20
    assert kube.status("wait")["jctSeconds"] >= 20 + 5 - 1e-6
    names = [p["metadata"]["name"] for p in kube.pods.values()]
    assert len(names) == len(set(names)) == 2 + 1 + 1


async def test_a_restart_after_the_delay_ended_releases_the_stage_without_waiting_again():
    kube, clock = FakeKube(), FakeClock()
    first = Harness(kube, clock, 1, IdleRootsOnce(delay=5))
    await first.submit("w", {"stages": [stage("a", duration=5)]})
    clock.advance(30)  # the operator was down while the slot ended
    second = Harness(kube, clock, 1, IdleRootsOnce(delay=5))
    await intake.rebuild(second.pools)
    await second.settle()
    assert second.released() == ["w-a-0"]
    assert kube.status("w")["idleSlots"][0]["released"] is True
    assert kube.reasons("w").count("IdleSlot") == 1


async def test_a_failed_task_is_retried_on_its_executor_then_the_workflow_fails():
    h = harness(pool=2)
    await h.submit(
        "flaky", {"stages": [stage("a", tasks=2, backoffLimit=1), stage("z", deps=("a",))]}
    )
    executor = h.kube.pods[("default", "flaky-a-0")]["metadata"]["annotations"][ANNOTATION_EXECUTOR]
    await h.finish("flaky-a-0", "Failed", after=1)
    retry = h.kube.pods[("default", "flaky-a-0-r1")]
    assert not retry["spec"].get("schedulingGates")
    assert retry["metadata"]["annotations"][ANNOTATION_EXECUTOR] == executor
    assert h.kube.status("flaky")["stages"][0]["failed"] == 1
    assert "TaskRetry" in h.kube.reasons("flaky")
    await h.submit("other", {"stages": [stage("a", duration=1)]})
    assert h.released("other") == []  # the pool is full: 2 tasks of "flaky"
    await h.finish("flaky-a-0-r1", "Failed", after=1)
    status = h.kube.status("flaky")
    assert status["phase"] == "Failed"
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["status"] == "True" and failed["reason"] == "TaskFailed"
    assert "Stage 'a'" in failed["message"] and "backoffLimit of 1" in failed["message"]
    assert "exited with code 3" in failed["message"]
    assert status["completionTime"] and status["jctSeconds"] >= 0
    # its unfinished pods are deleted, its executors serve the next workflow
    assert ("default", "flaky-a-1") not in h.kube.pods
    assert h.released("other") == ["other-a-0"]
    assert h.metrics.value("idlegate_workflows_finished_total", result="failed") == 1


async def test_an_invalid_spec_is_marked_and_evented_and_does_not_stop_the_others():
    h = harness(pool=2)
    cyclic = {"stages": [stage("root"), stage("x", deps=("y",)), stage("y", deps=("x",))]}
    await h.submit("bad", cyclic)
    await h.submit("good", {"stages": [stage("a")]})
    status = h.kube.status("bad")
    assert status["phase"] == "Invalid"
    valid = {c["type"]: c for c in status["conditions"]}["Valid"]
    assert valid["status"] == "False" and valid["reason"] == "InvalidSpec"
    assert "cycle" in valid["message"]
    assert h.kube.pods_of("bad") == []
    warning = [e for e in h.kube.events if e["reason"] == "InvalidSpec"]
    assert warning[0]["type"] == "Warning" and "cycle" in warning[0]["message"]
    assert h.released("good") == ["good-a-0"]
    # an unchanged invalid workflow is not judged again (e.g. at a restart)
    h.admit(h.kube.workflows[("default", "bad")])
    await h.settle()
    assert h.kube.reasons("bad").count("InvalidSpec") == 1


async def test_a_gang_larger_than_the_pool_is_invalid():
    h = harness(pool=2)
    await h.submit("gang", {"stages": [stage("g", tasks=3, gang=True)]})
    status = h.kube.status("gang")
    assert status["phase"] == "Invalid"
    assert "gang of 3 tasks" in status["conditions"][0]["message"]


async def test_a_pod_the_api_server_rejects_fails_the_workflow():
    h = harness(pool=2)
    h.kube.fail["create_pod"] = [ApiError(422, "Invalid", 'Pod "x" is invalid: spec.containers')]
    await h.submit("rej", {"stages": [stage("a")]})
    status = h.kube.status("rej")
    assert status["phase"] == "Failed"
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["reason"] == "PodRejected" and "spec.containers" in failed["message"]
    assert h.bridge.core.cluster.free_executors == 2


async def test_transient_api_errors_are_retried():
    h = harness(pool=1)
    h.kube.fail["create_pod"] = [ApiError(503, "ServiceUnavailable", "etcd is sad")]
    h.kube.fail["patch_workflow_status"] = [ApiError(0, "ConnectionError", "reset")]
    await h.submit("t", {"stages": [stage("a")]})
    assert h.released() == ["t-a-0"]
    assert h.kube.status("t")["phase"] == "Running"
    assert h.metrics.value("idlegate_api_errors_total", status="503") == 1


async def test_a_pod_name_still_taken_by_a_deleted_workflow_is_waited_for():
    h = harness(pool=1)
    stale = {
        "metadata": {
            "name": "again-a-0",
            "namespace": "default",
            "labels": {LABEL_WORKFLOW: "again", "idlegate.io/stage": "a", "idlegate.io/task": "0"},
            "annotations": {"idlegate.io/attempt": "0"},
            "ownerReferences": [{"kind": "DagWorkflow", "uid": "old", "controller": True}],
        },
        "spec": {},
        "status": {"phase": "Succeeded"},
    }
    h.kube.pods[("default", "again-a-0")] = stale
    body = h.kube.add_workflow("again", {"stages": [stage("a")]})
    h.admit(body)
    for _ in range(5):  # the garbage collector is slow
        await asyncio.sleep(0.01)
    assert h.kube.pods[("default", "again-a-0")] is stale
    del h.kube.pods[("default", "again-a-0")]  # collected at last
    await h.settle()
    pod = h.kube.pods[("default", "again-a-0")]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"]


async def test_deleting_a_workflow_frees_its_executors_for_the_others():
    h = harness(pool=1)
    first = await h.submit("first", {"stages": [stage("a", duration=100)]})
    await h.submit("second", {"stages": [stage("a")]})
    assert h.released() == ["first-a-0"]
    del h.kube.workflows[("default", "first")]
    h.pools.handle(Forget("default", "first", first["metadata"]["uid"]))
    await h.settle()
    assert "second-a-0" in h.released()
    assert h.metrics.value("idlegate_workflows_finished_total", result="deleted") == 1


async def test_only_the_operators_own_gate_is_removed():
    h = harness(pool=1)
    h.kube.webhook_gates = ["example.com/quota"]
    await h.submit("g", {"stages": [stage("a")]})
    pod = h.kube.pods[("default", "g-a-0")]
    assert pod["spec"]["schedulingGates"] == [{"name": "example.com/quota"}]
    assert pod["metadata"]["annotations"][ANNOTATION_EXECUTOR] == "0"
    assert h.metrics.value("idlegate_gate_removals_total") == 1


async def test_a_pod_deleted_while_running_counts_as_a_failed_attempt():
    h = harness(pool=1)
    await h.submit("d", {"stages": [stage("a", backoffLimit=2)]})
    pod = h.kube.pods.pop(("default", "d-a-0"))
    h.pools.handle(PodSeen(pod, deleted=True))
    await h.settle()
    assert h.released() == ["d-a-0-r1"]
    assert h.kube.status("d")["stages"][0]["failed"] == 1


async def test_pod_names_of_long_workflows_are_unique_and_stable():
    h = harness(pool=1)
    long = "w" * 60
    await h.submit(long, {"stages": [stage("a" * 40, tasks=2)]})
    names = [p["metadata"]["name"] for p in h.kube.pods_of(long)]
    assert all(len(n) <= 63 for n in names) and len(set(names)) == len(names)
    assert names[0] == pod_name(long, "a" * 40, 0)


async def test_count_changes_are_batched_but_phase_changes_and_idle_slots_are_not():
    kube, clock = FakeKube(), FakeClock()
    h = Harness(kube, clock, 4, IdleRootsOnce(delay=5), status_interval=0.05)
    body = kube.add_workflow("b", {"stages": [stage("a", tasks=4, duration=1)]})
    h.admit(body)
    await h.settle()
    assert kube.status("b")["idleSlots"][0]["released"] is False  # at once, not batched
    clock.advance(5)
    await h.timers.fire_due(clock.now())
    await h.settle()
    # a phase change: as soon as the pace allows (one write per status_interval, issue 79),
    # the pods' release not held by it (the slot it waits for was written already)
    assert kube.status("b")["phase"] == "Pending" and len(h.released("b")) == 4
    await asyncio.sleep(0.05)
    await h.settle()
    assert kube.status("b")["phase"] == "Running"
    writes = kube.calls.count("patch_workflow_status")
    for name in ("b-a-0", "b-a-1", "b-a-2"):
        await h.finish(name, after=1)
    assert kube.calls.count("patch_workflow_status") == writes  # batched, not yet written
    await asyncio.sleep(0.2)
    await h.settle()
    assert kube.calls.count("patch_workflow_status") == writes + 1
    assert kube.status("b")["stages"][0]["succeeded"] == 3
    await h.finish("b-a-3", after=1)
    assert kube.status("b")["phase"] == "Succeeded"  # the final write is immediate


async def test_a_spec_change_of_a_running_workflow_is_refused_and_an_invalid_one_rechecked():
    h = harness(pool=1)
    body = await h.submit("run", {"stages": [stage("a")]})
    changed = copy.deepcopy(body)
    changed["metadata"]["generation"] = 2
    changed["spec"]["stages"][0]["tasks"] = 2  # (suspend, deadline, TTL, pod GC may change)
    h.spec_changed(changed)
    await h.settle()
    (warning,) = [e for e in h.kube.events if e["reason"] == "SpecChangeIgnored"]
    assert warning["type"] == "Warning" and "generation 2" in warning["message"]
    bad = await h.submit("fixme", {"stages": [stage("a", deps=("nope",))]})
    assert h.kube.status("fixme")["phase"] == "Invalid"
    fixed = copy.deepcopy(h.kube.workflows[("default", "fixme")])
    fixed["spec"] = {"stages": [stage("a")]}
    fixed["metadata"]["generation"] = 2
    h.kube.workflows[("default", "fixme")] = copy.deepcopy(fixed)
    h.spec_changed(fixed)
    await h.settle()
    status = h.kube.status("fixme")
    assert status["phase"] == "Pending" and status["observedGeneration"] == 2
    valid = {c["type"]: c for c in status["conditions"]}["Valid"]
    assert valid["status"] == "True" and valid["observedGeneration"] == 2
    assert bad["metadata"]["uid"] == fixed["metadata"]["uid"]


async def test_a_workflow_recreated_under_the_same_name_replaces_the_old_one():
    h = harness(pool=1)
    await h.submit("same", {"stages": [stage("a", duration=100)]})
    assert h.released() == ["same-a-0"]
    # deleted and created again before the deletion's watch event reached the operator
    del h.kube.pods[("default", "same-a-0")]  # (collected)
    await h.submit("same", {"stages": [stage("a", duration=1)]})
    assert h.bridge.core.cluster.free_executors == 0 and len(h.bridge.core.cluster.jobs) == 1
    new_uid = h.kube.workflows[("default", "same")]["metadata"]["uid"]
    pod = h.kube.pods[("default", "same-a-0")]
    assert pod["metadata"]["ownerReferences"][0]["uid"] == new_uid
    await h.run_to_completion()
    assert h.kube.status("same")["phase"] == "Succeeded"


async def test_a_shifted_gate_index_makes_the_guarded_patch_fail_and_the_release_retry():
    h = harness(pool=1)
    await h.submit("hold", {"stages": [stage("a", duration=100)]})  # takes the only executor
    h.kube.webhook_gates = ["x/first"]
    await h.submit("shift", {"stages": [stage("a")]})
    pod = h.kube.pods[("default", "shift-a-0")]
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == ["x/first", GATE]
    await h.finish("hold-a-0", after=100)  # the patch guards index 0, where x/first is now
    pod = h.kube.pods[("default", "shift-a-0")]
    assert pod["spec"]["schedulingGates"] == [{"name": "x/first"}]
    assert pod["metadata"]["annotations"][ANNOTATION_EXECUTOR] == "0"
    assert h.kube.calls.count("get_pod") == 1  # the 422 made it read the pod again


async def test_pods_of_a_deleted_workflow_deleted_before_it_are_not_created_again():
    """The garbage collector's pod deletions may be reported before the workflow's own:
    the operator checks the workflow before creating a pod again, and forgets it."""
    h = harness(pool=2)
    await h.submit("gone", {"stages": [stage("a", tasks=3, backoffLimit=2)]})
    assert len(h.released("gone")) == 2 and len(h.kube.pods_of("gone")) == 3
    del h.kube.workflows[("default", "gone")]
    for key in [k for k in h.kube.pods if k[1].startswith("gone-")]:
        h.pools.handle(PodSeen(h.kube.pods.pop(key), deleted=True))
    await h.settle()
    assert not h.kube.pods_of("gone")
    assert ("default", "gone") not in h.bridge.core.workflows and h.bridge.core.busy == 0
    assert h.kube.calls.count("create_pod") == 3  # (the first three; none again)
    await h.submit("next", {"stages": [stage("a", tasks=2)]})
    assert h.released() == ["next-a-0", "next-a-1"]


async def test_a_pod_deleted_by_hand_is_created_again_after_one_check_of_its_workflow():
    h = harness(pool=1)
    await h.submit("w", {"stages": [stage("a", backoffLimit=2)]})
    h.pools.handle(PodSeen(h.kube.pods.pop(("default", "w-a-0")), deleted=True))
    await h.settle()
    assert h.released() == ["w-a-0-r1"]
    assert h.kube.calls.count("get_workflow") == 1
    assert not h.bridge.core.workflows[("default", "w")].pod_vanished
