"""Cleanup, deadlines and suspend against the in-memory API (tests/operator_fakes.py).

Pod GC deletes a pod only after the status that counts it has landed, and a restart reads
the collected tasks back from ``completedIndexes``; the TTL is derived from the persisted
completion time (a restart arms it at the same time, and it deletes once); the
workflow-level strategies and the TTL wait for the history record; a deadline fails the
workflow and frees its executors; suspend keeps a workflow out of the pool and resume
puts it back, with nothing done twice.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest

from idlegate.api.status import format_indexes, parse_indexes
from idlegate.operator.core.events import PodSeen
from idlegate.operator.edge import intake
from idlegate.sim.spec import SpecError, parse_workflow
from idlegate.sim.timestamps import from_datetime
from tests.operator_fakes import FakeClock, FakeKube, Harness, harness, stage


def _finished(pools: Any, body: dict[str, Any], pods: list[dict[str, Any]]) -> None:
    """A finished DagWorkflow's watch event, as kopf's handler in operator/handlers/workflows.py takes it:
    its TTL armed and its pods collected."""
    pools.default.carry(pools.cleanup.seen(body, pods))


pytestmark = [pytest.mark.looptime, pytest.mark.asyncio]


def watch_deletions(h: Harness) -> list[str]:
    """Deliver each pod deletion to the bridge as the watch would (the pod's last state);
    returns the list of deleted pod names, growing."""
    deleted: list[str] = []
    original = h.kube.delete_pod

    async def delete_pod(namespace: str, name: str) -> None:
        pod = copy.deepcopy(h.kube.pods.get((namespace, name)))
        await original(namespace, name)
        deleted.append(name)
        if pod is not None:
            h.pools.handle(PodSeen(pod, deleted=True))

    h.kube.delete_pod = delete_pod  # type: ignore[method-assign]
    return deleted


def body(h: Harness, name: str) -> dict[str, Any]:
    return copy.deepcopy(h.kube.workflows[("default", name)])


def conditions(h: Harness, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in h.kube.status(name).get("conditions", [])}


async def change_spec(h: Harness, name: str, **fields: Any) -> None:
    """A spec update of the workflow (kopf's update handler)."""
    stored = h.kube.workflows[("default", name)]
    stored["spec"].update(fields)
    stored["metadata"]["generation"] += 1
    h.spec_changed(stored)
    await h.settle()


# -- completedIndexes ------------------------------------------------------------------------


async def test_completed_indexes_use_the_job_format_and_read_back():
    assert format_indexes([1, 3, 4, 5, 7]) == "1,3-5,7"
    assert format_indexes([0, 1]) == "0,1" and format_indexes([]) is None
    assert parse_indexes("1,3-5,7", 10) == {1, 3, 4, 5, 7}
    assert parse_indexes("0-99", 3) == {0, 1, 2}  # (nothing beyond the stage)
    assert parse_indexes("1,x", 10) == set() and parse_indexes(None, 10) == set()


async def test_the_new_fields_are_validated():
    spec = parse_workflow(
        {
            "stages": [stage("a")],
            "ttlSecondsAfterFinished": 0,
            "podGC": {"strategy": "OnPodSuccess"},
            "activeDeadlineSeconds": 60,
            "suspend": True,
        }
    )
    assert spec.pod_gc is not None and spec.pod_gc.strategy == "OnPodSuccess"
    for bad in (
        {"ttlSecondsAfterFinished": -1},
        {"podGC": {"strategy": "Sometimes"}},
        {"activeDeadlineSeconds": 0},
        {"suspend": "yes"},
    ):
        with pytest.raises(SpecError):
            parse_workflow({"stages": [stage("a")], **bad})


# -- pod GC ------------------------------------------------------------------------------------


async def test_on_pod_completion_deletes_each_pod_after_the_status_that_counts_it():
    h = harness(pool=1)
    deleted = watch_deletions(h)
    spec = {"stages": [stage("a", 3), stage("b", 1, deps=("a",))]}
    await h.submit("wf", {**spec, "podGC": {"strategy": "OnPodCompletion"}})
    await h.finish("wf-a-0", after=10)
    # the status that counts it landed first, then its pod went
    assert h.kube.status("wf")["stages"][0]["completedIndexes"] == "0"
    assert deleted == ["wf-a-0"]
    await h.finish("wf-a-1", after=10)
    await h.finish("wf-a-2", after=10)
    await h.finish("wf-b-0", after=10)
    status = h.kube.status("wf")
    assert status["phase"] == "Succeeded", status
    assert sorted(deleted) == ["wf-a-0", "wf-a-1", "wf-a-2", "wf-b-0"]
    assert h.kube.pods_of("wf") == []
    assert status["stages"][0]["completedIndexes"] == "0-2"
    assert h.metrics.value("idlegate_task_failures_total") == 0  # no deletion was a failure
    assert h.bridge.core.cluster.free_executors == 1  # freed once, not twice


async def test_a_restart_after_pod_gc_knows_the_collected_tasks_succeeded():
    kube, clock = FakeKube(), FakeClock()
    first = Harness(kube, clock, 1, _fifo(), pod_gc="OnPodSuccess")
    watch_deletions(first)
    await first.submit("wf", {"stages": [stage("a", 3), stage("b", deps=("a",))]})
    await first.finish("wf-a-0", after=10)
    await first.finish("wf-a-1", after=10)
    assert sorted(p["metadata"]["name"] for p in kube.pods_of("wf")) == ["wf-a-2"]
    second = Harness(kube, clock, 1, first.bridge.core.scheduler, pod_gc="OnPodSuccess")
    watch_deletions(second)
    await intake.rebuild(second.pools)
    await second.settle()
    wf = second.bridge.core.workflows[("default", "wf")]
    assert wf.job.stages[0].finished == 2  # read from completedIndexes, not re-run
    assert second.released() == ["wf-a-2"]
    await second.finish("wf-a-2", after=10)
    await second.finish("wf-b-0", after=10)
    assert kube.status("wf")["phase"] == "Succeeded"
    assert kube.pods_of("wf") == []


async def test_on_pod_success_keeps_failed_pods_and_workflow_gc_waits_for_the_history(
    tmp_path: Path,
):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")  # the sink cannot be written: no record
    h = harness(pool=1, history_file=blocked / "history.jsonl", pod_gc="OnWorkflowCompletion")
    watch_deletions(h)
    spec = {"stages": [stage("a", 1, backoffLimit=1)]}
    await h.submit("keep", {**spec, "podGC": {"strategy": "OnPodSuccess"}})
    await h.finish("keep-a-0", "Failed", after=5)
    await h.finish("keep-a-0-r1", after=5)
    assert [p["metadata"]["name"] for p in h.kube.pods_of("keep")] == ["keep-a-0"]
    await h.submit("all", {"stages": [stage("a")]})  # the operator's default strategy
    await h.finish("all-a-0", after=5)
    for _ in range(200):  # the sink's worker fails
        if h.metrics.value("idlegate_history_errors_total") >= 2:
            break
        await asyncio.sleep(0.01)
    await h.settle()
    assert h.kube.status("all")["phase"] == "Succeeded"
    # (a watch event): no record, so no GC
    _finished(h.pools, body(h, "all"), h.kube.pods_of("all"))
    await h.settle()
    assert len(h.kube.pods_of("all")) == 1
    h.kube.workflows[("default", "all")]["status"]["historyRecorded"] = True  # recorded later
    _finished(h.pools, body(h, "all"), h.kube.pods_of("all"))
    await h.settle()
    assert h.kube.pods_of("all") == []
    h.bridge.history.close()


# -- TTL ---------------------------------------------------------------------------------------


async def test_ttl_deletes_once_at_the_right_time_across_a_restart():
    kube, clock = FakeKube(), FakeClock()
    first = Harness(kube, clock, 1, _fifo())
    await first.submit("wf", {"stages": [stage("a")], "ttlSecondsAfterFinished": 300})
    await first.finish("wf-a-0", after=10)
    done = from_datetime(kube.status("wf")["completionTime"])
    _finished(first.pools, body(first, "wf"), first.kube.pods_of("wf"))
    uid = body(first, "wf")["metadata"]["uid"]
    assert first.timers.armed[f"ttl/{uid}"][0] == done + 300
    clock.advance(100)  # the operator restarts before the TTL has passed
    second = Harness(kube, clock, 1, first.bridge.core.scheduler)
    await intake.rebuild(second.pools)
    assert second.timers.armed[f"ttl/{uid}"][0] == done + 300  # armed again, same time
    assert await second.timers.fire_due(clock.advance(199)) == 0
    assert await second.timers.fire_due(clock.advance(1)) == 1
    await second.settle()
    assert ("default", "wf") not in kube.workflows
    assert [m for _, m, n in kube.done if m == "delete_workflow"] == ["delete_workflow"]
    # the first operator's timer, had it survived, finds it gone: no second deletion
    await first.timers.fire_due(clock.now())
    await first.settle()
    assert [m for _, m, n in kube.done if m == "delete_workflow"] == ["delete_workflow"]


async def test_the_operator_default_ttl_spares_running_and_invalid_workflows():
    h = harness(pool=1, ttl_after_finished=0)
    await h.submit("bad", {"stages": [stage("a", deps=("nope",))]})
    await h.submit("run", {"stages": [stage("a")]})
    for name in ("bad", "run"):
        _finished(h.pools, body(h, name), h.kube.pods_of(name))
    assert h.timers.armed == {}
    await h.finish("run-a-0", after=1)
    _finished(h.pools, body(h, "run"), h.kube.pods_of("run"))
    await h.timers.fire_due(h.clock.now())
    await h.settle()
    assert ("default", "run") not in h.kube.workflows and ("default", "bad") in h.kube.workflows


# -- deadlines ---------------------------------------------------------------------------------


async def test_a_deadline_fails_the_workflow_mid_stage_and_frees_its_executors():
    h = harness(pool=2)
    spec = {"stages": [stage("a", 3, 100)], "activeDeadlineSeconds": 50}
    await h.submit("slow", spec)
    await h.submit("next", {"stages": [stage("a")]})
    assert h.released() == ["slow-a-0", "slow-a-1"] and len(h.kube.pods_of("slow")) == 3
    await h.finish("slow-a-0", after=40)  # mid-stage: a-2 runs on that executor
    assert await h.timers.fire_due(h.clock.advance(10)) == 1
    await h.settle()
    status = h.kube.status("slow")
    failed = conditions(h, "slow")["Failed"]
    assert status["phase"] == "Failed" and failed["reason"] == "DeadlineExceeded"
    assert "activeDeadlineSeconds (50 s" in failed["message"]
    assert [p["metadata"]["name"] for p in h.kube.pods_of("slow")] == ["slow-a-0"]  # ended one
    assert "DeadlineExceeded" in h.kube.reasons("slow")
    assert h.released() == ["next-a-0"]  # its executors went to the next workflow


# -- suspend -----------------------------------------------------------------------------------


async def test_a_workflow_created_suspended_waits_out_of_the_pool_until_resumed():
    h = harness(pool=1)
    await h.submit("held", {"stages": [stage("a")], "suspend": True})
    await h.submit("other", {"stages": [stage("a", 1, 50)]})
    assert h.kube.pods_of("held") == [] and h.released() == ["other-a-0"]
    assert ("default", "held") not in h.bridge.core.workflows
    assert [j.name for j in h.bridge.core.cluster.jobs] == ["default/other"]  # the policy's view
    held = conditions(h, "held")
    assert held["Suspended"]["status"] == "True" and held["Running"]["reason"] == "Suspended"
    assert h.kube.status("held")["phase"] == "Suspended"
    await change_spec(h, "held", suspend=False)
    assert conditions(h, "held")["Suspended"]["reason"] == "Resumed"
    await h.finish("other-a-0", after=50)
    await h.finish("held-a-0", after=10)
    assert h.kube.status("held")["phase"] == "Succeeded"


async def test_suspending_mid_run_evicts_running_tasks_and_resume_runs_them_again():
    h = harness(pool=2)
    await h.submit("wf", {"stages": [stage("a", 3, 20), stage("b", deps=("a",))]})
    await h.finish("wf-a-0", after=20)  # a-2 takes its executor
    assert h.released() == ["wf-a-1", "wf-a-2"]
    await h.submit("other", {"stages": [stage("x", 1, 5)]})
    await change_spec(h, "wf", suspend=True)
    assert h.released() == ["other-x-0"]  # the evicted tasks' executors went on at once
    assert sorted(p["metadata"]["name"] for p in h.kube.pods_of("wf")) == ["wf-a-0"]
    status = h.kube.status("wf")
    assert conditions(h, "wf")["Suspended"]["status"] == "True" and status["phase"] == "Suspended"
    assert status["stages"][0]["running"] == 0 and status["stages"][0]["succeeded"] == 1
    assert "Suspended" in h.kube.reasons("wf")
    await change_spec(h, "wf", suspend=False)
    assert sorted(h.released("wf")) == ["wf-a-1"]  # one executor is free: a-2 waits
    await h.run_to_completion()
    status = h.kube.status("wf")
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0
    assert h.bridge.core.cluster.free_executors == 2


async def test_a_suspended_workflow_still_meets_its_deadline():
    h = harness(pool=1)
    spec = {"stages": [stage("a", 2, 30)], "activeDeadlineSeconds": 60}
    await h.submit("wf", spec)
    await change_spec(h, "wf", suspend=True)
    assert await h.timers.fire_due(h.clock.advance(60)) == 1  # (it reads the workflow first)
    await h.settle()
    assert conditions(h, "wf")["Failed"]["reason"] == "DeadlineExceeded"
    assert h.kube.pods_of("wf") == [] and h.bridge.core.cluster.free_executors == 1
    assert "Resumed" not in h.kube.reasons("wf")  # admitted only to be failed


async def test_resumed_without_its_deadline_a_workflow_is_not_failed_by_it():
    h = harness(pool=1)
    await h.submit("wf", {"stages": [stage("a", 1, 100)], "activeDeadlineSeconds": 60})
    await change_spec(h, "wf", suspend=True)  # held with its deadline running
    await change_spec(h, "wf", suspend=False, activeDeadlineSeconds=None)
    assert conditions(h, "wf")["Suspended"]["reason"] == "Resumed"
    assert await h.timers.fire_due(h.clock.advance(60)) == 0
    await h.settle()
    assert h.kube.status("wf")["phase"] == "Running" and h.released() == ["wf-a-0"]


def _fifo() -> Any:
    from idlegate.policy import make_scheduler

    return make_scheduler("fifo")
