"""Stopping tasks in the operator's pure core (issue 82): `Core.stop_tasks` (the entry a
reclaim's plan calls; the event `StopTasks`) asks for evictions (`EvictPod`), and each
answer stops a task, moves on to the next victim, or finds the task ended. A leader that
takes over mid-way finishes what the pod's mark says, and stops nothing twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from idlegate.api.eviction import GANG_NOT_STOPPED, stop_mark
from idlegate.api.labels import ANNOTATION_PREEMPTED, ANNOTATION_STOP, FINALIZER_STOP
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.task_pods import read_task_pod
from idlegate.operator.core.events import Admit, Forget, PodSeen, StopTasks
from idlegate.operator.core.evictions import Evictions
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    EvictPod,
    PatchStatus,
    PostEvent,
    Refused,
    ReleaseStop,
    RemoveGate,
)
from idlegate.operator.edge.kube import ApiError
from idlegate.policy import make_scheduler
from idlegate.sim.timestamps import stamp
from tests.operator_fakes import Harness, harness
from tests.operator_fakes import stage as fake_stage
from tests.reclaim_helpers import admitted, marked, of, reasons, status_of
from tests.test_kube_client import Script, client, serving
from tests.test_operator_core import T0, core_of, pod, said, stage, taken, workflow


def test_a_stopped_task_runs_again_as_a_new_pod_and_counts_no_failure() -> None:
    core = core_of(pool=2)
    spec = stage("a", tasks=2, backoffLimit=0)
    admitted(core, "w", spec)
    taken(core)
    running = pod("w", spec, 0, "Running", executor=0)
    said(core, PodSeen(running), T0 + 1)
    said(core, StopTasks((0,), 1, "reclaim", "owners"), T0 + 5)
    (evict,) = of(taken(core), EvictPod)
    assert (evict.name, evict.executor, evict.stop) == ("w-a-0", 0, stop_mark("owners", "reclaim"))
    assert core.cluster.busy == 2  # (nothing stopped before the API takes the eviction)
    # the eviction's effect seen first (the pod being deleted): its answer decides
    deleting = marked(running, evict)
    deleting["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:30Z"
    said(core, PodSeen(deleting), T0 + 6)
    assert taken(core) == [] and core.cluster.busy == 2
    said(core, Confirmed(evict, marked(running, evict)), T0 + 6)
    intents = taken(core)
    assert reasons(intents)[0] == "Preempted"
    (said_,) = [i for i in of(intents, PostEvent) if i.reason == "Preempted"]
    assert "queue 'owners' (reclaim): 6.0 executor-seconds of work lost" in said_.message
    # gated again, a new pod (attempt 1, its stop counted), released on the freed executor
    (created,) = of(intents, CreatePod)
    assert (created.name, created.gated, created.preempted) == ("w-a-0-r1", True, 1)
    assert created.manifest["metadata"]["annotations"][ANNOTATION_PREEMPTED] == "1"
    (released,) = of(intents, RemoveGate)
    assert (released.name, released.executor) == ("w-a-0-r1", 0)
    assert status_of(intents)["stages"][0]["failed"] == 0
    # the stopped attempt is in the status (its page draws it once its pod is gone)
    (gone,) = status_of(intents)["stopped"]
    assert (gone["pod"], gone["stage"], gone["queue"], gone["lostSeconds"]) == (
        "w-a-0",
        "a",
        "owners",
        6.0,
    )
    assert (gone["stopTime"], gone["startTime"]) == (stamp(T0 + 6), stamp(T0))
    task = core.workflows[("default", "w")].stages[0].tasks[0]
    assert (task.failures, task.preempted, task.attempt) == (0, 1, 1)
    assert core.metrics.value("idlegate_preempted_tasks_total", queue="owners", reason="reclaim")
    assert core.metrics.value("idlegate_preempted_work_seconds_total") == 6.0
    assert core.cluster.preempted == 1 and core.cluster.preempted_seconds == 6.0
    assert core.cluster.stopped == ()  # (the driver took it: nothing kept)
    # the old pod's end (attempt 0) is its stop's: nothing happens
    said(core, PodSeen(deleting, deleted=True), T0 + 7)
    assert taken(core) == []
    rerun = pod("w", spec, 0, "Succeeded", executor=0)
    rerun["metadata"].update(name="w-a-0-r1")
    rerun["metadata"]["annotations"].update({"idlegate.io/attempt": "1"})
    said(core, PodSeen(rerun), T0 + 20)
    said(core, PodSeen(pod("w", spec, 1, "Succeeded", executor=1)), T0 + 21)
    final = status_of(taken(core))
    assert final["phase"] == "Succeeded" and final["stages"][0]["failed"] == 0


def test_a_refused_eviction_moves_on_to_the_next_victim_and_never_stops_more() -> None:
    core = core_of(pool=3)
    for name in ("x", "y", "z"):
        admitted(core, name, stage("a"))
    taken(core)
    said(core, StopTasks((0, 1, 2), 1, "reclaim", "owners"), T0 + 5)
    (first,) = of(taken(core), EvictPod)
    assert first.executor == 0
    said(core, Refused(first, 429, "TooManyRequests", "disruption budget"), T0 + 6)
    intents = taken(core)
    (second,) = of(intents, EvictPod)
    assert second.executor == 1 and "Preempted" not in reasons(intents)
    body = pod("y", stage("a"), 0, "Running", executor=1)
    said(core, Confirmed(second, marked(body, second)), T0 + 7)
    assert not of(taken(core), EvictPod)  # (one was needed: the third is not asked)
    evictions = first.evictions
    assert evictions.stopped == [1] and evictions.done
    assert "a PodDisruptionBudget refused its eviction" in evictions.refused[0]
    assert core.cluster.preempted == 1


def test_a_task_that_ends_before_its_eviction_is_not_stopped_and_frees_as_much() -> None:
    core = core_of(pool=2)
    spec = stage("a", tasks=2)
    admitted(core, "w", spec)
    taken(core)
    said(core, StopTasks((0, 1), 1, "reclaim", "owners"), T0 + 5)
    (evict,) = of(taken(core), EvictPod)
    said(core, Confirmed(evict, pod("w", spec, 0, "Succeeded", executor=0)), T0 + 6)
    intents = taken(core)
    assert "Preempted" not in reasons(intents) and not of(intents, EvictPod)
    assert evict.evictions.ended == [0] and evict.evictions.done
    assert core.cluster.preempted == 0 and status_of(intents)["stages"][0]["succeeded"] == 1


def test_what_cannot_be_stopped_says_why_and_the_next_victim_is_asked() -> None:
    core = core_of(pool=2)
    admitted(core, "w", stage("a"))
    taken(core)
    evictions = core.stop_tasks((1, 0), 1, "reclaim", "owners")  # (executor 1 runs nothing)
    (evict,) = of(core.intents.take(), EvictPod)
    assert evict.executor == 0 and evictions.refused == {1: "no task runs on it now"}
    again = core.stop_tasks((0,), 1, "reclaim", "owners")  # (being stopped already)
    assert again.refused == {0: "it is being stopped"} and again.done


def test_a_pod_deleted_by_someone_else_while_its_eviction_was_asked_fails_its_attempt() -> None:
    core = core_of(pool=1)
    spec = stage("a", backoffLimit=1)
    admitted(core, "w", spec)
    taken(core)
    said(core, StopTasks((0,), 1, "reclaim", "owners"), T0 + 5)
    (evict,) = of(taken(core), EvictPod)
    said(core, Refused(evict, 404, "NotFound", 'pods "w-a-0" not found'), T0 + 6)
    intents = taken(core)
    assert "TaskRetry" in reasons(intents) and core.cluster.preempted == 0
    assert evict.evictions.refused == {0: "its pod was gone"}


def test_a_new_leader_finishes_a_stop_whose_mark_is_on_a_running_pod_once() -> None:
    # the leader before marked the pod, then died before its eviction was answered
    spec = stage("a", tasks=2)
    running = pod("w", spec, 0, "Running", executor=0)
    running["metadata"]["annotations"][ANNOTATION_STOP] = stop_mark("owners", "reclaim")
    core = core_of(pool=2)
    admitted(core, "w", spec, [running])
    (evict,) = of(taken(core), EvictPod)
    assert (evict.name, evict.executor, evict.evictions.queue) == ("w-a-0", 0, "owners")
    said(core, Confirmed(evict, running), T0 + 3)
    intents = taken(core)
    assert "Preempted" in reasons(intents) and not of(intents, EvictPod)
    assert [c.name for c in of(intents, CreatePod) if c.preempted == 1] == ["w-a-0-r1"]
    assert core.cluster.preempted == 1


def test_a_new_leader_reruns_a_task_whose_pod_was_evicted_counting_no_failure() -> None:
    # evicted (its pod being deleted, its mark on it), the answer lost with the leader
    spec = stage("a", backoffLimit=0)
    gone = pod("w", spec, 0, "Running", executor=0)
    gone["metadata"]["annotations"][ANNOTATION_STOP] = stop_mark("owners", "reclaim")
    gone["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:30Z"
    core = core_of(pool=1)
    admitted(core, "w", spec, [gone])
    intents = taken(core)
    assert not of(intents, EvictPod)  # (stopped once: not again)
    (created,) = of(intents, CreatePod)
    assert (created.name, created.preempted) == ("w-a-0-r1", 1)
    assert status_of(intents)["phase"] != "Failed"
    task = core.workflows[("default", "w")].stages[0].tasks[0]
    assert (task.failures, task.preempted, task.attempt) == (0, 1, 1)
    # and a restart after the rerun started counts its attempts less its stops
    rerun = read_task_pod(created.manifest)
    assert rerun is not None and (rerun.attempt, rerun.preempted) == (1, 1)
    later = core_of(pool=1)
    body = created.manifest | {"status": {"phase": "Running"}}
    body["spec"].pop("schedulingGates", None)
    body["metadata"]["annotations"]["idlegate.io/executor"] = "0"
    admitted(later, "w", spec, [body])
    task = later.workflows[("default", "w")].stages[0].tasks[0]
    assert (task.failures, task.preempted, task.attempt) == (0, 1, 1)
    assert later.cluster.busy == 1 and not of(taken(later), EvictPod)


def test_an_evictions_bookkeeping_asks_at_most_what_is_needed() -> None:
    evictions = Evictions((4, 5, 6), 2, "q", "reclaim")
    assert [evictions.take(), evictions.take(), evictions.take()] == [4, 5, None]
    evictions.settle(4, why="refused")
    assert evictions.take() == 6 and evictions.take() is None
    evictions.settle(5, stopped=True)
    evictions.settle(6)
    assert evictions.done and (evictions.stopped, evictions.ended) == ([5], [6])


# -- through the edge: the applier marks, then evicts (the fakes of tests/operator_fakes.py)


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_the_applier_marks_the_pod_then_evicts_it_and_the_task_reruns() -> None:
    h = harness(pool=2)
    await h.submit("w", {"stages": [fake_stage("a", tasks=2, duration=10)]})
    assert h.released("w") == ["w-a-0", "w-a-1"]
    h.clock.advance(4)
    h.bridge.handle(StopTasks((0,), 1, "reclaim", "owners"))
    await h.settle()
    evicted = h.kube.pods[("default", "w-a-0")]
    assert evicted["metadata"]["annotations"][ANNOTATION_STOP] == stop_mark("owners", "reclaim")
    assert evicted["metadata"].get("deletionTimestamp")
    # marked, evicted, then (its stop counted) its finalizer taken off
    writes = [m for _, m, n in h.kube.done if n == "w-a-0"]
    assert writes[-3:] == ["patch_pod", "evict_pod", "patch_pod"]
    assert not h.kube.pods[("default", "w-a-0")]["metadata"]["finalizers"]
    assert "Preempted" in h.kube.reasons("w")
    h.kube.grace_over("w-a-0")
    assert ("default", "w-a-0") not in h.kube.pods
    assert h.released("w") == ["w-a-0-r1", "w-a-1"]
    await h.run_to_completion()
    status = h.kube.status("w")
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_disruption_budgets_refusal_takes_the_mark_off_and_the_next_task_goes() -> None:
    h = harness(pool=2)
    await h.submit("w", {"stages": [fake_stage("a", tasks=2, duration=10)]})
    h.kube.budgeted = {"w-a-0"}
    h.bridge.handle(StopTasks((0, 1), 1, "reclaim", "owners"))
    await h.settle()
    kept = h.kube.pods[("default", "w-a-0")]
    assert ANNOTATION_STOP not in kept["metadata"]["annotations"]
    assert not kept["metadata"]["finalizers"]  # (nor the finalizer: it would keep it)
    assert not kept["metadata"].get("deletionTimestamp")
    assert h.kube.pods[("default", "w-a-1")]["metadata"].get("deletionTimestamp")
    assert h.kube.calls.count("evict_pod") == 2  # (the 429 answered once: not retried)
    assert h.core.cluster.preempted == 1


def test_the_api_client_takes_an_evictions_429_as_its_answer() -> None:
    async def scenario(server: Script) -> None:
        api = client(server, [])
        try:
            with pytest.raises(ApiError) as refused:
                await api.evict_pod("ns", "p")
            await api.evict_pod("ns", "p")  # (the next answer: 201)
        finally:
            api.close()
        assert refused.value.status == 429

    with serving([(429, {"Retry-After": "10"}), (201, {})]) as server:
        asyncio.run(scenario(server))
        assert [(m, p) for _, m, p in server.seen] == [
            ("POST", "/api/v1/namespaces/ns/pods/p/eviction")
        ] * 2


def test_a_pod_that_fails_on_its_own_while_its_eviction_is_asked_is_a_failure() -> None:
    # its eviction then refused: the failure was taken in (a retry), nothing is stopped;
    # the evicted pod's own end (Failed, being deleted) is its stop's, no failure
    core = core_of(pool=2)
    spec = stage("a", tasks=2, backoffLimit=1)
    admitted(core, "w", spec)
    taken(core)
    said(core, StopTasks((0, 1), 2, "reclaim", "owners"), T0 + 5)
    first, second = of(taken(core), EvictPod)
    failed = pod("w", spec, 0, "Failed", executor=0)
    said(core, PodSeen(failed), T0 + 6)
    assert "TaskRetry" in reasons(taken(core))
    said(core, Refused(first, 429, "TooManyRequests", "disruption budget"), T0 + 7)
    stopping = marked(pod("w", spec, 1, "Failed", executor=1), second)
    stopping["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:30Z"
    said(core, PodSeen(stopping), T0 + 7)
    said(core, Confirmed(second, marked(pod("w", spec, 1, "Running", executor=1), second)), T0 + 8)
    intents = taken(core)
    assert "Preempted" in reasons(intents) and "TaskRetry" not in reasons(intents)
    track = core.workflows[("default", "w")].stages[0]
    assert (track.tasks[0].failures, track.tasks[1].failures, track.tasks[1].preempted) == (1, 0, 1)
    assert not track.tasks[0].evicting  # (its retry may be stopped later)
    assert first.evictions.stopped == [1] and core.cluster.preempted == 1


# -- a leader taking over mid-way (two operators, one after the other, on one fake API)


def _refused_as_it_dies(kube: Any, method: str, after: bool) -> None:
    """The leader dies at its `method` call: before it takes effect, or after (its answer
    lost with it); it learns only a refusal, which it cannot act on any more."""
    gone = ApiError(403, "Forbidden", "this replica is not the leader any more")
    if not after:
        kube.fail[method] = [gone]
        return

    def effect(called: str, name: str) -> None:
        if called == method:
            kube.on_effect = None
            raise gone

    kube.on_effect = effect


async def _take_over(h: Any) -> Any:
    """A new leader on the same API: it admits the workflow from the API as it is."""
    new = Harness(h.kube, h.clock, 2, make_scheduler("fifo"))
    new.admit(h.kube.workflows[("default", "w")])
    await new.settle()
    return new


async def _stopping_as_the_leader_dies(after: bool) -> Any:
    """A pool of 2 running one workflow of two 10 s tasks whose leader is asked to stop
    the first and dies at the eviction: before the API server took it, or `after`."""
    h = harness(pool=2)
    await h.submit("w", {"stages": [fake_stage("a", tasks=2, duration=10)]})
    _refused_as_it_dies(h.kube, "evict_pod", after=after)
    h.bridge.handle(StopTasks((0,), 1, "reclaim", "owners"))
    await h.settle()
    return h


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_leader_that_died_after_marking_a_pod_has_its_stop_finished_once() -> None:
    h = await _stopping_as_the_leader_dies(after=False)
    assert h.kube.pods[("default", "w-a-0")]["metadata"]["annotations"][ANNOTATION_STOP]
    new = await _take_over(h)
    evictions = [n for _, m, n in h.kube.done if m == "evict_pod"]
    assert evictions == ["w-a-0"] and new.core.cluster.preempted == 1
    assert "Preempted" in h.kube.reasons("w")
    del h.kube.pods[("default", "w-a-0")]  # (its grace period over)
    await new.run_to_completion()
    status = h.kube.status("w")
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0
    assert sorted(n for _, n in h.kube.pods) == ["w-a-0-r1", "w-a-1"]


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_leader_that_died_once_its_eviction_was_taken_has_the_task_run_again_once() -> None:
    h = await _stopping_as_the_leader_dies(after=True)
    assert h.kube.pods[("default", "w-a-0")]["metadata"].get("deletionTimestamp")
    new = await _take_over(h)
    assert [m for _, m, _ in h.kube.done].count("evict_pod") == 1  # (not evicted again)
    assert ("default", "w-a-0-r1") in h.kube.pods  # (its task runs again)
    del h.kube.pods[("default", "w-a-0")]
    await new.run_to_completion()
    status = h.kube.status("w")
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_pod_stopped_as_the_leader_died_is_kept_until_the_next_one_counts_it() -> None:
    # issue 93: kill -9 8 ms after the eviction, restart 2 s later, the pod's grace period
    # over by then: it was gone, and its task ran again as attempt 0 with no Preempted Event
    h = await _stopping_as_the_leader_dies(after=True)
    h.clock.advance(2)
    h.kube.grace_over("w-a-0")
    assert ("default", "w-a-0") in h.kube.pods  # (its finalizer keeps it)
    new = await _take_over(h)
    assert "Preempted" in h.kube.reasons("w")
    labels = {"queue": "owners", "reason": "reclaim"}
    assert new.core.metrics.value("idlegate_preempted_tasks_total", **labels) == 1
    assert ("default", "w-a-0") not in h.kube.pods  # (counted: let go, and gone)
    await new.run_to_completion()
    assert sorted(n for _, n in h.kube.pods) == ["w-a-0-r1", "w-a-1"]
    status = h.kube.status("w")
    assert status["phase"] == "Succeeded" and status["stages"][0]["failed"] == 0


@pytest.mark.asyncio
@pytest.mark.looptime
async def test_a_rebuild_lets_go_of_a_stopped_pod_whose_workflow_was_deleted_meanwhile() -> None:
    # the finalizer must never keep a pod for ever: its workflow deleted while no operator
    # ran, the next one's rebuild takes it off (nothing to count)
    from idlegate.operator.edge import intake

    h = await _stopping_as_the_leader_dies(after=True)
    del h.kube.workflows[("default", "w")]
    h.kube.grace_over("w-a-0")
    assert ("default", "w-a-0") in h.kube.pods  # (held)
    new = Harness(h.kube, h.clock, 2, make_scheduler("fifo"))
    await intake.rebuild(new.pools)
    await new.settle()
    assert ("default", "w-a-0") not in h.kube.pods


def test_a_gangs_task_is_not_stopped_on_kubernetes() -> None:
    core = core_of(pool=2)
    admitted(core, "g", stage("a", tasks=2, gang=True))
    taken(core)
    evictions = core.stop_tasks((0, 1), 1, "reclaim", "owners")
    assert not of(core.intents.take(), EvictPod) and evictions.done
    assert set(evictions.refused.values()) == {GANG_NOT_STOPPED}


def started_at(body: dict[str, Any], t: float) -> dict[str, Any]:
    """`body` whose container has run since `t`, as the kubelet reports it."""
    from idlegate.sim.timestamps import to_datetime

    running = {"running": {"startedAt": to_datetime(t)}}
    body["status"]["containerStatuses"] = [{"name": "task", "state": running}]
    return body


def test_a_task_restored_by_a_new_leader_loses_the_work_since_its_pod_started() -> None:
    # issue 93: stopped 1 s after a restart, a task that had run 9 s before it was said to
    # lose 1 s (its start was the restart's); it loses the 10 s its pod ran
    spec = stage("a", tasks=2)
    running = started_at(pod("w", spec, 0, "Running", executor=0), T0 - 9)
    core = core_of(pool=2)
    admitted(core, "w", spec, [running])
    taken(core)
    said(core, StopTasks((0,), 1, "reclaim", "owners"), T0 + 1)
    (evict,) = of(taken(core), EvictPod)
    said(core, Confirmed(evict, marked(running, evict)), T0 + 1)
    (preempted,) = [i for i in of(taken(core), PostEvent) if i.reason == "Preempted"]
    assert "10.0 executor-seconds of work lost" in preempted.message
    assert core.metrics.value("idlegate_preempted_work_seconds_total") == 10.0
    assert core.cluster.preempted_seconds == 10.0


def test_a_new_leader_says_and_counts_a_stop_whose_answer_the_old_one_lost() -> None:
    # issue 93: the operator died 8 ms after its eviction was taken; the pod, being deleted
    # with its mark, was rerun as attempt 1, but no Preempted Event nor metric said so
    from idlegate.sim.timestamps import to_datetime

    spec = stage("a", backoffLimit=0)
    gone = started_at(pod("w", spec, 0, "Running", executor=0), T0 - 10)
    gone["metadata"]["annotations"][ANNOTATION_STOP] = stop_mark("owners", "reclaim")
    gone["metadata"]["finalizers"] = [FINALIZER_STOP]  # (its stop not counted)
    gone["metadata"]["deletionTimestamp"] = to_datetime(T0 - 2)
    core = core_of(pool=1)
    admitted(core, "w", spec, [gone])
    intents = taken(core)
    (created,) = of(intents, CreatePod)
    assert (created.name, created.preempted) == ("w-a-0-r1", 1)
    (preempted,) = [i for i in of(intents, PostEvent) if i.reason == "Preempted"]
    assert "queue 'owners' (reclaim): 8.0 executor-seconds of work lost" in preempted.message
    labels = {"queue": "owners", "reason": "reclaim"}
    assert core.metrics.value("idlegate_preempted_tasks_total", **labels) == 1
    assert core.metrics.value("idlegate_preempted_work_seconds_total") == 8.0
    (release,) = of(intents, ReleaseStop)  # (counted: let go once the status says so)
    assert release.name == "w-a-0" and release.after_status
    assert of(intents[: intents.index(release)], PatchStatus)  # (the status it waits for)
    (kept,) = status_of(intents)["stopped"]
    assert (kept["pod"], kept["lostSeconds"], kept["attempt"], kept["preempted"]) == (
        "w-a-0",
        8.0,
        0,
        1,
    )
    # a later restart reads the stopped attempts back from the status
    body = workflow("w", spec)
    body["status"] = status_of(intents)
    again = core_of(pool=1)
    said(again, Admit(body, [], NamespacePolicy()), T0 + 5)
    assert [a.pod for a in again.workflows[("default", "w")].stopped] == ["w-a-0"]


def test_a_stop_counted_before_a_restart_whose_pod_is_gone_runs_its_next_attempt() -> None:
    # the leader counted the stop, its status landed and the finalizer came off, then it
    # died before the next attempt's pod was made; the pod is gone: the status says the
    # stop, so the task runs as attempt 1 (not attempt 0 again), with no second Event
    core = core_of(pool=1)
    spec = stage("a", backoffLimit=0)
    admitted(core, "w", spec)
    taken(core)
    said(core, StopTasks((0,), 1, "reclaim", "owners"), T0 + 5)
    (evict,) = of(taken(core), EvictPod)
    said(core, Confirmed(evict, marked(pod("w", spec, 0, "Running", executor=0), evict)), T0 + 6)
    body = workflow("w", spec)
    body["status"] = status_of(taken(core))
    later = core_of(pool=1)
    said(later, Admit(body, [], NamespacePolicy()), T0 + 8)
    intents = taken(later)
    task = later.workflows[("default", "w")].stages[0].tasks[0]
    assert (task.attempt, task.preempted, task.failures) == (1, 1, 0)
    assert [c.name for c in of(intents, CreatePod)] == ["w-a-0-r1"]
    assert "Preempted" not in reasons(intents) and status_of(intents)["phase"] != "Failed"


def test_a_new_leader_lets_go_of_a_stopped_pod_whose_stop_was_counted_and_counts_none() -> None:
    # attempt 0 stopped and counted (attempt 1 made), its finalizer not yet off; attempt 1
    # ended by itself while marked: nothing to count, both let go
    spec = stage("a", tasks=1)
    first = marked_pod(pod("w", spec, 0, "Failed", executor=0), deleting=True)
    second = marked_pod(pod("w", spec, 0, "Succeeded", executor=0), deleting=False)
    second["metadata"]["name"] = "w-a-0-r1"
    second["metadata"]["annotations"].update({"idlegate.io/attempt": "1"})
    core = core_of(pool=1)
    admitted(core, "w", spec, [first, second])
    intents = taken(core)
    assert "Preempted" not in reasons(intents)
    assert sorted(r.name for r in of(intents, ReleaseStop)) == ["w-a-0", "w-a-0-r1"]
    assert not core.metrics.value("idlegate_preempted_tasks_total", queue="q", reason="reclaim")


def marked_pod(body: dict[str, Any], *, deleting: bool) -> dict[str, Any]:
    """`body` carrying a stop's mark and finalizer, being deleted if `deleting`."""
    body["metadata"]["annotations"][ANNOTATION_STOP] = stop_mark("q", "reclaim")
    body["metadata"]["finalizers"] = [FINALIZER_STOP]
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:30Z"
    return body


def test_a_deleted_workflow_lets_go_of_the_pods_its_stops_hold() -> None:
    # the workflow deleted while its pod's eviction was asked: the answer may never come
    # (its writes are dropped), the pod would be kept for ever by the finalizer
    core = core_of(pool=1)
    admitted(core, "w", stage("a"))
    taken(core)
    said(core, StopTasks((0,), 1, "reclaim", "owners"), T0 + 1)
    (evict,) = of(taken(core), EvictPod)
    said(core, Forget("default", "w", evict.owner.uid), T0 + 2)
    assert [r.name for r in of(taken(core), ReleaseStop)] == ["w-a-0"]


def test_a_stopped_pod_seen_ending_is_let_go_unless_its_answer_is_awaited() -> None:
    core = core_of(pool=1)
    spec = stage("a")
    admitted(core, "w", spec)
    taken(core)
    said(core, StopTasks((0,), 1, "reclaim", "owners"), T0 + 1)
    (evict,) = of(taken(core), EvictPod)
    deleting = marked(pod("w", spec, 0, "Running", executor=0), evict)
    deleting["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:30Z"
    said(core, PodSeen(deleting), T0 + 2)
    assert not of(taken(core), ReleaseStop)  # (its answer counts it first)
    said(core, Confirmed(evict, marked(pod("w", spec, 0, "Running", executor=0), evict)), T0 + 3)
    assert [r.name for r in of(taken(core), ReleaseStop)] == ["w-a-0"]


def test_a_rebuild_lets_go_of_the_held_pods_of_workflows_deleted_meanwhile() -> None:
    from idlegate.operator.edge.intake import orphans_held

    spec = stage("a")
    held = marked_pod(pod("w", spec, 0, "Failed", executor=0), deleting=True)
    kept = marked_pod(pod("v", spec, 0, "Failed", executor=0), deleting=True)
    uid = kept["metadata"]["ownerReferences"][0]["uid"]
    (release,) = orphans_held([held, kept, pod("x", spec, 0, "Running", executor=0)], {uid})
    assert (release.name, release.owner.name) == ("w-a-0", "w")
