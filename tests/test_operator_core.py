"""The operator's pure core: what happened in (`Core.handle(event, now)`), intents out.

No API, no kopf, no event loop: each test drives :class:`Core` and asserts on the intents
its outbox holds.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from idlegate.api.argo_pods import ArgoPod
from idlegate.api.podsecurity import NamespacePolicy
from idlegate.api.settings import Settings
from idlegate.api.task_pods import Owner, task_pod
from idlegate.api.visibility import pending
from idlegate.operator.core.core import Core
from idlegate.operator.core.events import Admit, IdleEnded, Join, PodSeen, Schedule
from idlegate.operator.core.intents import (
    Confirmed,
    CreatePod,
    DeletePod,
    DeleteWorkflow,
    LiveStatus,
    PatchStatus,
    PostEvent,
    Refused,
    RemoveGate,
    SetTimer,
)
from idlegate.operator.kinds.external import ExternalJob
from idlegate.operator.metrics import Metrics
from idlegate.policy import make_scheduler
from idlegate.sim.argo import map_workflow
from idlegate.sim.protocol import Decision, Scheduler
from idlegate.sim.spec import StageSpec
from tests.helpers import Waits

T0 = 1_700_000_000.0


def workflow(name: str, *stages: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "generation": 1,
        "creationTimestamp": "2023-11-14T22:13:20Z",
    }
    return {"metadata": meta, "spec": {"stages": list(stages)}}


def stage(name: str, tasks: int = 1, seconds: float = 10.0, **kw: Any) -> dict[str, Any]:
    return {"name": name, "tasks": tasks, "taskDurationSeconds": seconds, **kw}


def core_of(pool: int = 1, policy: str | Scheduler = "fifo") -> Core:
    scheduler = make_scheduler(policy) if isinstance(policy, str) else policy
    return Core(Settings(pool_size=pool), scheduler, metrics=Metrics(pool, scheduler.name))


_SAID: dict[Core, list[Any]] = {}


def said(core: Core, event: Any, now: float) -> None:
    """Hand `core` the event at `now` (its one entry), keeping what it answers."""
    _SAID.setdefault(core, []).extend(core.handle(event, now))


def taken(core: Core) -> list[Any]:
    """What `core` answered since the last call: its intents (its facts for the features
    left out)."""
    kept = _SAID.pop(core, [])
    return [i for i in kept if type(i).__module__ != "idlegate.operator.core.events"]


def pod(name: str, spec: dict[str, Any], index: int, phase: str, executor: int) -> dict[str, Any]:
    """The pod of task `index` of stage `spec` of workflow `name`, as the API reports it."""
    owner = Owner("default", name, f"uid-{name}")
    body = task_pod(owner, StageSpec.model_validate(spec), index, executor=executor, gated=False)
    body["status"] = {"phase": phase}
    return body


def kinds(intents: list[Any]) -> list[str]:
    return [type(i).__name__ for i in intents]


def test_a_pods_writes_share_one_lane_and_a_workflows_deletion_another() -> None:
    owner = Owner("ns", "wf", "uid-1")
    create = CreatePod(owner, "a", 0, 0, "wf-a-0", {})
    release = RemoveGate(owner, "a", 0, 0, "wf-a-0", 3, {})
    assert create.gated and create.lane == release.lane == DeletePod(owner, "wf-a-0").lane
    assert create.lane != DeletePod(owner, "wf-a-1").lane
    assert DeleteWorkflow(owner, "ttl").lane not in (create.lane, DeletePod(owner, "wf").lane)


def test_a_new_workflow_gets_gated_pods_and_its_first_task_is_released_on_an_executor() -> None:
    core = core_of(pool=1)
    said(core, Admit(workflow("w", stage("a", tasks=2)), [], NamespacePolicy()), T0)
    intents = taken(core)
    created = [i for i in intents if isinstance(i, CreatePod)]
    assert [(c.name, c.gated) for c in created] == [("w-a-0", True), ("w-a-1", True)]
    (released,) = [i for i in intents if isinstance(i, RemoveGate)]
    assert (released.name, released.executor) == ("w-a-0", 0)
    # the gate is removed after the pod was asked for, and the status follows the release
    assert intents.index(created[0]) < intents.index(released)
    statuses = [i for i in intents if isinstance(i, PatchStatus)]
    assert statuses and all(isinstance(s.status, LiveStatus) for s in statuses)
    assert statuses[-1].status.workflow.status()["phase"] == "Running"
    reasons = [i.reason for i in intents if isinstance(i, PostEvent)]
    assert reasons[0] == "Accepted" and "Released" in reasons
    assert core.cluster.busy == 1 and taken(core) == []


def test_a_succeeded_pod_lets_its_executor_go_on_with_the_stages_next_task() -> None:
    core = core_of(pool=1)
    spec = stage("a", tasks=2)
    said(core, Admit(workflow("w", spec), [], NamespacePolicy()), T0)
    taken(core)
    said(core, PodSeen(pod("w", spec, 0, "Succeeded", executor=0)), T0 + 10)
    intents = taken(core)
    (released,) = [i for i in intents if isinstance(i, RemoveGate)]
    assert (released.name, released.executor) == ("w-a-1", 0)
    assert "Released" in [i.reason for i in intents if isinstance(i, PostEvent)]
    said(core, PodSeen(pod("w", spec, 1, "Succeeded", executor=0)), T0 + 20)
    status = [i for i in taken(core) if isinstance(i, PatchStatus)][-1].status
    status = status.workflow.status()
    assert status["phase"] == "Succeeded" and status["jctSeconds"] > 0


def test_the_same_pod_state_twice_changes_nothing() -> None:
    core = core_of(pool=1)
    spec = stage("a", tasks=2)
    said(core, Admit(workflow("w", spec), [], NamespacePolicy()), T0)
    taken(core)
    running = pod("w", spec, 0, "Running", executor=0)
    said(core, PodSeen(running), T0 + 1)
    said(core, PodSeen(running), T0 + 2)
    assert taken(core) == []


class _Idles:
    """A policy that puts every stage into an idle slot of 30 s once, then follows fifo."""

    name = "idles"

    def __init__(self) -> None:
        self.fifo = make_scheduler("fifo")

    def reset(self, rng: Any) -> None:
        self.fifo.reset(rng)

    def decide(self, view: Any) -> Any:
        stage = view.runnable_stages()[0]
        if not stage.delayed:
            return Decision(stage, stage.job.held + 1, idle_delay=30.0)
        return self.fifo.decide(view)


def test_an_idle_slot_sets_a_timer_and_its_end_releases_the_stage() -> None:
    core = core_of(pool=1, policy=_Idles())
    said(core, Admit(workflow("w", stage("a")), [], NamespacePolicy()), T0)
    intents = taken(core)
    (timer,) = [i for i in intents if isinstance(i, SetTimer)]
    assert timer.at == T0 + 30 and timer.fire.stage == 0
    assert not [i for i in intents if isinstance(i, RemoveGate)]
    status = [i for i in intents if isinstance(i, PatchStatus)][-1].status.workflow.status()
    assert status["idleSlots"][0]["released"] is False
    said(core, IdleEnded(Owner("default", "w", "uid-w"), 0), T0 + 30)
    intents = taken(core)
    assert [i.name for i in intents if isinstance(i, RemoveGate)] == ["w-a-0"]
    assert "IdleSlotEnded" in [i.reason for i in intents if isinstance(i, PostEvent)]
    status = [i for i in intents if isinstance(i, PatchStatus)][-1].status.workflow.status()
    assert status["idleSlots"][0]["released"]


class _Raises:
    name = "raises"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: Any) -> Any:
        raise RuntimeError("broken policy")


def test_a_policy_that_raises_is_answered_by_the_fallback_rule_with_a_warning() -> None:
    core = core_of(pool=1, policy=_Raises())
    said(core, Admit(workflow("w", stage("a")), [], NamespacePolicy()), T0)
    intents = taken(core)
    assert [i.name for i in intents if isinstance(i, RemoveGate)] == ["w-a-0"]
    warnings = [i for i in intents if isinstance(i, PostEvent) and i.type == "Warning"]
    assert [w.reason for w in warnings] == ["PolicyError"]
    assert core.metrics.value("idlegate_policy_errors_total", policy="raises") == 1


def test_a_gate_removed_by_others_with_no_executor_free_runs_beyond_the_pool() -> None:
    core = core_of(pool=1)
    spec = stage("a", tasks=2)
    said(core, Admit(workflow("w", spec), [], NamespacePolicy()), T0)
    taken(core)
    said(core, PodSeen(pod("w", spec, 1, "Running", executor=0)), T0 + 1)
    assert len(core.cluster.beyond) == 1 and core.cluster.busy == 2
    assert "ReleasedByOthers" in [i.reason for i in taken(core) if hasattr(i, "reason")]
    # the first task ends: its executor is owed to the task beyond the pool, nothing new
    said(core, PodSeen(pod("w", spec, 0, "Succeeded", executor=0)), T0 + 10)
    assert not [i for i in taken(core) if isinstance(i, RemoveGate | CreatePod)]
    assert core.cluster.beyond == [] and core.cluster.busy == 1


def test_a_pod_beyond_the_pool_deleted_before_it_ended_is_retried_when_the_policy_says() -> None:
    core = core_of(pool=1)
    spec = stage("a", tasks=2, backoffLimit=1)
    said(core, Admit(workflow("w", spec), [], NamespacePolicy()), T0)
    running = pod("w", spec, 1, "Running", executor=0)
    said(core, PodSeen(running), T0 + 1)
    taken(core)
    said(core, PodSeen(running, deleted=True), T0 + 2)
    # it no longer counts against the pool, and its retry waits for a free executor
    assert core.cluster.beyond == [] and core.cluster.busy == 1
    assert not [i for i in taken(core) if isinstance(i, RemoveGate | CreatePod)]
    said(core, PodSeen(pod("w", spec, 0, "Succeeded", executor=0)), T0 + 10)
    created = [i for i in taken(core) if isinstance(i, CreatePod)]
    assert [(c.name, c.executor) for c in created] == [("w-a-1-r1", 0)]


def test_the_core_loads_neither_kopf_nor_a_kubernetes_client() -> None:
    code = (
        "import sys, idlegate.operator.core.core\n"
        "heavy = {'kopf', 'kubernetes', 'aiohttp', 'apscheduler', 'torch'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_pod_write_refused_for_good_fails_its_workflow_and_frees_its_executor() -> None:
    core = core_of(pool=1)
    said(core, Admit(workflow("w", stage("a", tasks=2)), [], NamespacePolicy()), T0)
    (released,) = [i for i in taken(core) if isinstance(i, RemoveGate)]
    said(core, Refused(released, 403, "Forbidden", "no", permanent=True), T0 + 1)
    intents = taken(core)
    assert [i.reason for i in intents if isinstance(i, PostEvent)] == ["PodRejected"]
    assert {i.name for i in intents if isinstance(i, DeletePod)} == {"w-a-0", "w-a-1"}
    status = [i for i in intents if isinstance(i, PatchStatus)][-1].status.workflow.status()
    assert status["phase"] == "Failed"
    assert core.cluster.busy == 0 and core.workflows == {}


def test_a_confirmed_write_is_read_like_a_watch_event_and_a_transient_refusal_is_kept() -> None:
    core = core_of(pool=1)
    spec = stage("a", tasks=2)
    said(core, Admit(workflow("w", spec), [], NamespacePolicy()), T0)
    (released,) = [i for i in taken(core) if isinstance(i, RemoveGate)]
    said(core, Refused(released, None, "Timeout", "no answer", permanent=False), T0 + 1)
    assert taken(core) == [] and core.workflows
    done = pod("w", spec, 0, "Succeeded", executor=0)
    said(core, Confirmed(released, done), T0 + 10)
    assert [i.name for i in taken(core) if isinstance(i, RemoveGate)] == ["w-a-1"]


def test_a_workflow_it_finished_is_not_admitted_again_from_a_stale_read() -> None:
    """After an outage the rebuild (or kopf) hands in the workflow as the API showed it
    before its final status landed: Running, its last stage's pods still running. The
    core finished it meanwhile (the pods' Succeeded events came first): admitting it again
    would write that stale Running status after the final one and count it twice."""
    core = core_of(pool=1)
    a, b = stage("a"), stage("b", dependsOn=["a"])
    body = workflow("w", a, b)
    said(core, Admit(body, [], NamespacePolicy()), T0)
    said(core, PodSeen(pod("w", a, 0, "Succeeded", executor=0)), T0 + 10)
    stale = {**body, "status": {"phase": "Running", "startTime": "2023-11-14T22:13:20Z"}}
    stale_pods = [pod("w", a, 0, "Succeeded", executor=0), pod("w", b, 0, "Running", executor=0)]
    said(core, PodSeen(pod("w", b, 0, "Succeeded", executor=0)), T0 + 20)
    assert core.workflows == {}  # finished: out of the pool
    taken(core)
    said(core, Admit(stale, stale_pods, NamespacePolicy()), T0 + 21)
    assert core.workflows == {}
    assert core.known(Owner("default", "w", "uid-w"))
    assert taken(core) == [] and core.cluster.busy == 0
    assert core.metrics.value("idlegate_workflows_finished_total", result="succeeded") == 1


# -- Argo Workflows: their pods are Argo's, released by the same core ---------------------------

ARGO = Owner("default", "etl", "uid-etl", kind="Workflow", api_version="argoproj.io/v1alpha1")
ARGO_META = {"name": "etl", "namespace": "default", "uid": "uid-etl"}


def argo_diamond() -> dict[str, Any]:
    pod = {"name": "p", "container": {"image": "busybox"}}
    tasks = [
        {"name": "a", "template": "p"},
        {"name": "b", "template": "p", "dependencies": ["a"]},
        {"name": "c", "template": "p", "dependencies": ["a"]},
    ]
    main = {"name": "main", "dag": {"tasks": tasks}}
    spec = {"entrypoint": "main", "templates": [main, pod]}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": ARGO_META,
        "spec": spec,
    }


def argo_pod(node: str, phase: str = "Pending", gated: bool = True) -> ArgoPod:
    """The pod Argo made for node `node` of the Workflow (``.a``)."""
    return ArgoPod("default", f"etl-{node.strip('.')}-1234", "etl", "etl" + node, "", gated, phase)


def argo_in(core: Core, pods: list[ArgoPod]) -> ExternalJob:
    """The Argo diamond in the core's pool with its `pods` (as features/argo.py admits it)."""
    said(core, Join(ARGO, map_workflow(argo_diamond()), T0, pods), T0)
    return core.holding(ARGO)


def test_an_argo_stages_launch_is_a_remove_gate_of_a_gated_pod_of_that_stage() -> None:
    core = core_of(pool=1)
    wf = argo_in(core, [argo_pod(".a")])
    said(core, Schedule(), T0)
    intents = taken(core)
    (released,) = [i for i in intents if isinstance(i, RemoveGate)]
    assert (released.name, released.stage, released.executor) == ("etl-a-1234", "a", 0)
    assert released.owner == ARGO and released.spec is None  # Argo's pod: never created here
    assert [(i.owner, i.reason) for i in intents if isinstance(i, PostEvent)] == [
        (ARGO, "Released")
    ]
    assert not [i for i in intents if isinstance(i, CreatePod | PatchStatus)]
    # a's pod succeeds; b's and c's appear gated: the one executor goes to one of them
    for pod in (argo_pod(".a", "Succeeded", gated=False), argo_pod(".b"), argo_pod(".c")):
        assert wf.seen(core.cluster, pod, T0 + 10) == []
    said(core, Schedule(), T0 + 10)
    intents = taken(core)
    (released,) = [i for i in intents if isinstance(i, RemoveGate)]
    assert (released.name, released.stage, released.executor) == ("etl-b-1234", "b", 0)
    assert [i.reason for i in intents if isinstance(i, PostEvent)] == ["Released", "Waiting"]


def test_an_argo_stages_idle_slot_is_a_timer_whose_end_releases_its_pod() -> None:
    core = core_of(pool=1, policy=_Idles())
    argo_in(core, [argo_pod(".a")])
    said(core, Schedule(), T0)
    intents = taken(core)
    (timer,) = [i for i in intents if isinstance(i, SetTimer)]
    assert (timer.at, timer.fire) == (T0 + 30, IdleEnded(ARGO, 0))
    assert not [i for i in intents if isinstance(i, RemoveGate | PatchStatus)]
    assert [i.reason for i in intents if isinstance(i, PostEvent)] == ["IdleSlot"]
    said(core, IdleEnded(replace(ARGO, uid="uid-other"), 0), T0 + 30)  # not this workflow
    assert taken(core) == []
    said(core, IdleEnded(ARGO, 0), T0 + 30)
    intents = taken(core)
    assert [(i.name, i.executor) for i in intents if isinstance(i, RemoveGate)] == [
        ("etl-a-1234", 0)
    ]


def test_a_refused_argo_release_is_a_warning_on_the_workflow_which_goes_on() -> None:
    core = core_of(pool=1)
    argo_in(core, [argo_pod(".a")])
    said(core, Schedule(), T0)
    (released,) = [i for i in taken(core) if isinstance(i, RemoveGate)]
    said(core, Refused(released, 403, "Forbidden", "no", permanent=True), T0 + 1)
    (warning,) = taken(core)
    assert isinstance(warning, PostEvent) and (warning.owner, warning.reason) == (ARGO, "PodError")
    assert core.holding(ARGO) is not None and core.cluster.busy == 1


def _visible_reasons(core: Core) -> dict[str, str]:
    pools = SimpleNamespace(bridges={"p": SimpleNamespace(core=core, forecasts=None)}, waiting={})
    (queue,) = pending(pools)["pools"][0]["queues"]
    return {w["name"]: w["reason"] for w in queue["waiting"]}


def test_a_pool_without_queues_shows_the_waiting_events_own_message() -> None:
    # a full pool: the second workflow's Event and the visibility API say the same
    core = core_of(pool=1)
    said(core, Admit(workflow("w", stage("a")), [], NamespacePolicy()), T0)
    said(core, Admit(workflow("v", stage("b")), [], NamespacePolicy()), T0 + 1)
    (event,) = [i for i in taken(core) if isinstance(i, PostEvent) and "waits" in i.message]
    assert event.owner.name == "v" and "all 1 executors of the pool are busy" in event.message
    assert event.reason == "Accepted"  # (one Event at its admission says both: issue 79)
    assert _visible_reasons(core) == {"v": "all 1 executors of the pool are busy"}  # (its hold)
    # a round that ended with executors free: what the round said, not a guess of it; the
    # visibility API says what the admission let it do
    core = core_of(pool=2, policy=Waits())
    said(core, Admit(workflow("w", stage("a")), [], NamespacePolicy()), T0)
    (event,) = [i for i in taken(core) if isinstance(i, PostEvent) and "waits" in i.message]
    assert "chose to wait" in event.message and "2 executor(s) stay free" in event.message
    assert _visible_reasons(core) == {"w": "may start any task(s) of a now"}
