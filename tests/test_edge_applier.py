"""The write path of the core's intents (src/idlegate/operator/edge/: applier.py, lanes.py,
writes.py), on the in-memory API of tests/operator_fakes.py, in fake loop time (looptime): the outcomes it
hands back, the order of one object's writes, and that one workflow's blocked write never
blocks another's."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from idlegate.api.labels import GATE
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner, pod_name, task_pod
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    DeletePod,
    PatchStatus,
    PostEvent,
    Refused,
    RemoveGate,
)
from idlegate.operator.edge.applier import Applier
from idlegate.operator.edge.kube import ApiError
from idlegate.operator.edge.lanes import Lanes, Op
from idlegate.operator.edge.recorder import EVENTS_QUEUED, EventRecorder
from idlegate.operator.edge.watchdog import ApiHealth
from idlegate.operator.lag.pacing import Slots
from idlegate.operator.metrics import Metrics
from idlegate.sim.spec import parse_workflow
from tests.operator_fakes import FakeKube, Retrying, stage

pytestmark = [pytest.mark.looptime, pytest.mark.asyncio]


class Edge:
    """An applier over a FakeKube, with the outcomes it handed back."""

    def __init__(
        self,
        *,
        status_interval: float = 0.0,
        kube: FakeKube | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.kube = kube or FakeKube()
        self.metrics = Metrics(4, "fair")
        api = Retrying(self.kube, report=ApiHealth(self.metrics).report)
        lanes = Lanes(api, concurrency=concurrency)  # type: ignore[arg-type]
        events = EventRecorder(lanes, Settings(pool_size=4, component="idlegate"))
        self.outcomes: list[Any] = []
        self.applier = Applier(
            lanes,
            events,
            self.metrics,
            self.outcomes.append,
            status_interval=status_interval,
        )
        self.lanes = lanes

    def workflow(self, name: str, tasks: int = 2) -> tuple[Owner, Any]:
        body = self.kube.add_workflow(name, {"stages": [stage("a", tasks=tasks)]})
        owner = Owner("default", name, body["metadata"]["uid"])
        return owner, parse_workflow(body["spec"], "spec").stages[0]

    async def settle(self) -> None:
        await self.lanes.wait_idle(600)

    def counted(self) -> tuple[float, float]:
        return (
            self.metrics.value("idlegate_pods_created_total"),
            self.metrics.value("idlegate_gate_removals_total"),
        )


def create(owner: Owner, spec: Any, index: int, executor: int | None = None) -> CreatePod:
    name = pod_name(owner.name, spec.name, index, 0)
    return CreatePod(owner, spec.name, index, 0, name, spec, executor)


def release(owner: Owner, spec: Any, index: int, executor: int) -> RemoveGate:
    name = pod_name(owner.name, spec.name, index, 0)
    return RemoveGate(owner, spec.name, index, 0, name, executor, spec)


async def test_a_pod_is_created_then_released_and_each_write_confirmed_and_counted():
    e = Edge()
    owner, spec = e.workflow("w")
    e.applier.apply([create(owner, spec, 0), release(owner, spec, 0, executor=3)])
    await e.settle()
    pod = e.kube.pods[("default", "w-a-0")]
    assert GATE not in [g["name"] for g in pod["spec"].get("schedulingGates") or []]
    assert [type(o.intent).__name__ for o in e.outcomes] == ["CreatePod", "RemoveGate"]
    assert all(isinstance(o, Confirmed) and o.body for o in e.outcomes)
    assert e.counted() == (1, 1)


async def test_a_creation_whose_answer_was_lost_is_confirmed_through_the_409_counted_once():
    e = Edge()
    owner, spec = e.workflow("w")
    e.kube.lose["create_pod"] = 1
    e.applier.apply([create(owner, spec, 0, executor=1)])
    await e.settle()
    (outcome,) = e.outcomes
    assert isinstance(outcome, Confirmed) and outcome.body["metadata"]["name"] == "w-a-0"
    assert e.counted() == (1, 0)


async def test_one_workflows_blocked_write_never_blocks_anothers():
    e = Edge()
    old, spec = e.workflow("w")
    e.kube.pods.clear()
    # a pod of an older workflow of the same name, still there: w's creation waits it out
    blocker = task_pod(Owner("default", "w", "uid-older"), spec, 0, 0, gated=True)
    e.kube.pods[("default", "w-a-0")] = blocker
    other, other_spec = e.workflow("v")
    e.applier.apply([create(old, spec, 0), create(other, other_spec, 0)])
    await asyncio.sleep(5)
    assert [o.intent.owner.name for o in e.outcomes] == ["v"]  # v's went; w's still waits
    del e.kube.pods[("default", "w-a-0")]  # the older pod is gone at last
    await e.settle()
    assert [o.intent.owner.name for o in e.outcomes] == ["v", "w"]


@pytest.mark.parametrize("frees", [True, False])
async def test_a_release_waits_for_the_deletions_of_pods_whose_executors_were_given_back(frees):
    e = Edge()
    failed, spec = e.workflow("w")
    other, other_spec = e.workflow("v")
    e.applier.apply([create(failed, spec, 0), create(other, other_spec, 0)])
    await e.settle()
    e.kube.fault = lambda method: (
        ApiError(503, "ServiceUnavailable", "down") if method == "delete_pod" else None
    )
    e.applier.apply(
        [DeletePod(failed, "w-a-0", frees=frees), release(other, other_spec, 0, executor=0)]
    )
    await asyncio.sleep(3)
    # the deletion still fails: a release handing out its executor waits; another does not
    assert e.counted() == (2, 0 if frees else 1)
    e.kube.fault = None
    await e.settle()
    assert ("default", "w-a-0") not in e.kube.pods and e.counted() == (2, 1)


async def test_a_release_of_a_vanished_pod_creates_it_released_unless_the_workflow_is_gone():
    e = Edge()
    owner, spec = e.workflow("w")
    e.applier.apply([create(owner, spec, 0), create(owner, spec, 1)])
    await e.settle()
    del e.kube.pods[("default", "w-a-0")]
    e.applier.apply([release(owner, spec, 0, executor=0)])
    await e.settle()
    assert e.kube.pods[("default", "w-a-0")]["spec"].get("schedulingGates") in (None, [])
    del e.kube.pods[("default", "w-a-1")]
    del e.kube.workflows[("default", "w")]
    e.applier.apply([release(owner, spec, 1, executor=1)])
    await e.settle()
    last = e.outcomes[-1]
    assert isinstance(last, Refused) and last.gone and ("default", "w-a-1") not in e.kube.pods


async def test_a_refused_creation_is_a_permanent_refusal():
    e = Edge()
    owner, spec = e.workflow("w")
    e.kube.fail["create_pod"] = [ApiError(422, "Invalid", "spec.containers: Required value")]
    e.applier.apply([create(owner, spec, 0), DeletePod(owner, "w-a-9")])
    await e.settle()
    refused, deleted = e.outcomes
    assert isinstance(refused, Refused) and (refused.status, refused.permanent) == (422, True)
    assert isinstance(deleted, Confirmed)  # (a pod already gone: deleting it is success)


async def test_statuses_coalesce_and_a_release_waits_for_the_status_before_it():
    e = Edge(status_interval=1.0)
    owner, spec = e.workflow("w")
    e.applier.apply([create(owner, spec, 0)])
    await e.settle()
    e.kube.fault = lambda method: (
        ApiError(503, "ServiceUnavailable", "down") if method == "patch_workflow_status" else None
    )
    e.applier.apply(
        [
            PatchStatus(owner, {"phase": "Running", "n": 1}, urgent=False),
            PatchStatus(owner, {"phase": "Running", "n": 2}),  # (replaces the first)
            PostEvent(owner, "Normal", "IdleSlotEnded", "the slot ended"),
            dataclasses.replace(release(owner, spec, 0, 2), after_status=True),
        ]
    )
    await asyncio.sleep(3)
    assert e.counted() == (1, 0)  # the release waits for the status, failing meanwhile
    assert [ev["reason"] for ev in e.kube.events] == ["IdleSlotEnded"]  # (not held by it)
    e.kube.fault = None
    await e.settle()
    assert e.kube.workflows[("default", "w")]["status"]["n"] == 2 and e.counted() == (1, 1)
    statuses = [o for o in e.outcomes if isinstance(o.intent, PatchStatus)]
    assert [o.intent.status["n"] for o in statuses] == [2]


async def _a_hundred_creations_behind_a_held_connection(e: Edge) -> tuple[Any, asyncio.Event]:
    """`e`'s one connection held (until the Event returned is set) and a workflow's hundred
    pod creations waiting for it; the workflow's owner."""
    owner, spec = e.workflow("w", tasks=100)
    e.kube.pods.clear()
    busy = asyncio.Event()
    e.lanes.submit("x", Op("busy", lambda api: busy.wait()), lane="busy")  # (the connection)
    await asyncio.sleep(0)
    e.applier.apply([create(owner, spec, i) for i in range(100)])
    return owner, busy


@pytest.mark.parametrize("urgent", [True, False])
async def test_a_phase_goes_out_within_a_few_pod_writes_counts_only_after_them(urgent):
    """Issue 61: with a hundred pod creations waiting for the one connection, a status
    write of counts only (queued first) waits for them, coalesced; a phase given meanwhile
    (urgent) takes it along within `Slots.SHARE` writes."""
    e = Edge(concurrency=1)
    owner, busy = await _a_hundred_creations_behind_a_held_connection(e)
    e.applier.apply([PatchStatus(owner, {"phase": "Running", "n": 1}, urgent=False)])
    if urgent:
        e.applier.apply([PatchStatus(owner, {"phase": "Succeeded", "n": 2})])
    busy.set()
    await e.settle()
    (status,) = [i for i, o in enumerate(e.outcomes) if isinstance(o.intent, PatchStatus)]
    assert status in (range(Slots.SHARE) if urgent else [100])
    assert e.kube.workflows[("default", "w")]["status"]["n"] == (2 if urgent else 1)


async def test_an_argo_pods_release_is_read_then_patched_keeping_the_other_gates():
    """Argo made the pod (its webhook appended idlegate's gate after Kueue's): the release
    finds the gate's index by reading the pod, records the executor, keeps Argo's
    annotations; a pod gone meanwhile is no error and is not created."""
    e = Edge()
    argo = Owner("default", "etl", "uid-etl", kind="Workflow", api_version="argoproj.io/v1alpha1")
    notes = {"workflows.argoproj.io/node-name": "etl.a"}
    for name in ("etl-a", "etl-b"):
        gates = [{"name": "kueue.x-k8s.io/admission"}, {"name": GATE}]
        meta = {"name": name, "namespace": "default", "annotations": dict(notes)}
        e.kube.pods[("default", name)] = {"metadata": meta, "spec": {"schedulingGates": gates}}
    e.applier.apply(
        [
            RemoveGate(argo, "a", 0, 0, "etl-a", 2, None),
            RemoveGate(argo, "", 0, 0, "etl-b", None, None),  # released unscheduled
            RemoveGate(argo, "a", 0, 0, "etl-gone", 3, None),
        ]
    )
    await e.settle()
    a, b = e.kube.pods[("default", "etl-a")], e.kube.pods[("default", "etl-b")]
    for pod in (a, b):
        assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert a["metadata"]["annotations"] == {**notes, "idlegate.io/executor": "2"}
    assert b["metadata"]["annotations"] == notes
    assert ("default", "etl-gone") not in e.kube.pods
    assert all(isinstance(o, Confirmed) for o in e.outcomes) and len(e.outcomes) == 3
    released = {
        how: e.metrics.value("idlegate_argo_pods_released_total", how=how)
        for how in ("scheduled", "unscheduled")
    }
    assert released == {"scheduled": 1, "unscheduled": 1} and e.counted() == (0, 0)


async def test_an_event_equal_to_one_posted_before_a_restart_is_not_posted_again():
    edge = Edge()
    owner, _ = edge.workflow("w")
    accepted = PostEvent(owner, "Normal", "Accepted", "Scheduled by idlegate: 1 stage.")
    edge.applier.apply((accepted,))
    await edge.settle()
    restarted = Edge(kube=edge.kube)  # (its books are empty) on the same API
    other = PostEvent(owner, "Normal", "Released", "Released 1 of 2 task(s).")
    restarted.applier.apply((accepted, other))
    await restarted.settle()
    assert [e["reason"] for e in edge.kube.events] == ["Accepted", "Released"]


async def test_a_takeover_reads_the_events_posted_before_rather_than_posting_them_again():
    # issue 60, item 12: a new leader re-posted every Waiting Event there was, each refused
    edge = Edge()
    owner, _ = edge.workflow("w")
    accepted = PostEvent(owner, "Normal", "Accepted", "Scheduled by idlegate: 1 stage.")
    edge.applier.apply((accepted,))
    await edge.settle()
    restarted = Edge(kube=edge.kube)  # (its books are empty) on the same API
    restarted.applier.events.recall(restarted.lanes.kube, ["default"])
    other = PostEvent(owner, "Normal", "Released", "Released 1 of 2 task(s).")
    restarted.applier.apply((accepted, other))  # (recorded while the read runs: held)
    await asyncio.sleep(1)
    await restarted.settle()
    assert [e["reason"] for e in edge.kube.events] == ["Accepted", "Released"]
    assert edge.kube.calls.count("create_event") == 2  # (the equal one not posted again)


async def test_events_held_for_a_read_that_fails_are_posted_all_the_same():
    edge = Edge()
    owner, _ = edge.workflow("w")
    edge.kube.fail["list_events"] = [ApiError(403, "Forbidden", "cannot list events")]
    edge.applier.events.recall(edge.lanes.kube, ["default"])  # (an RBAC without list)
    edge.applier.apply((PostEvent(owner, "Normal", "Accepted", "Scheduled by idlegate."),))
    await asyncio.sleep(1)
    await edge.settle()
    assert [e["reason"] for e in edge.kube.events] == ["Accepted"]


async def test_an_event_waits_for_no_gated_creation():
    """Issue 79: with the one connection held and a hundred gated creations (ahead of need)
    waiting for it, an Event decided after them takes the connection next, not after them."""
    e = Edge(concurrency=1)
    owner, busy = await _a_hundred_creations_behind_a_held_connection(e)
    e.applier.apply([PostEvent(owner, "Normal", "Released", "Released 1 of 100 task(s).")])
    busy.set()
    await e.settle()
    assert e.kube.calls.count("create_event") == 1 and len(e.kube.pods) == 100
    assert e.kube.events and e.kube.calls.index("create_event") < e.kube.calls.index("create_pod")


async def test_events_past_the_queues_bound_are_dropped_and_counted():
    e = Edge(concurrency=1)
    owners = [e.workflow(f"w{i}")[0] for i in range(EVENTS_QUEUED + 5)]
    e.applier.apply([PostEvent(o, "Normal", "Accepted", "Accepted.") for o in owners])
    await e.settle()
    assert len(e.kube.events) == EVENTS_QUEUED
    assert e.metrics.value("idlegate_events_dropped_total") == 5
    e.applier.apply([PostEvent(owners[-1], "Normal", "Accepted", "Accepted.")])  # (room again)
    await e.settle()
    assert len(e.kube.events) == EVENTS_QUEUED + 1
