"""A reclaim on a pool that follows its nodes, end to end (issue 82: the operator's node
pools): the real kopf operator against the test API server, its kube-scheduler binding
pods to three Nodes by their requests, its eviction subresource and PodDisruptionBudgets,
and the simulated kubelet that stops an evicted pod within its grace period (tests/k8s).

The pool (``--pool-nodes pool=batch``) has two queues of the nodes' 9 CPUs; queue a's
workflows take all of them, queue b's idle quota lent, packed node by node: xa's three
tasks of 1 CPU on one node, xb's on another, xc's two and then xd's one on the third,
each workflow started after the one before. b's owner returns with a task of 1 CPU that
no node has free: the task that lost least is xd's, on the third node, but a budget keeps
it, so the next one on that node, one of xc's, is evicted (not one of xa's or xb's, on
other nodes). The owner's pod is bound there once the evicted pod has gone; the evicted
task runs again and every workflow succeeds.
With reclaim off (``Never``) nothing is evicted: the owner waits for a task to end.
"""

from __future__ import annotations

import threading
from typing import Any

import kmock
import pytest

from idlegate.api.labels import ANNOTATION_STOP, LABEL_WORKFLOW
from idlegate.api.queueing import QueueFile
from idlegate.sim.queues import queues_from
from tests.clocks import ScaledClock
from tests.e2e import (
    DWF,
    SPEED,
    PodMonitor,
    events_of,
    running_operator,
    stage,
    wait,
    wait_phase,
    workflow,
)
from tests.k8s.apiserver import NODES, PODS
from tests.k8s.harness import ApiServer
from tests.k8s.kubelet import SimKubelet, duration_of
from tests.k8s.scheduler import node
from tests.test_e2e_evict import GRACE, UNTIL_TOLD, running

# On an accelerated wall clock, not fake loop time: the real operator, the API emulator
# and the simulated kubelet run in threads of their own; why: tests/e2e.py, at SPEED.

LENT = {"xa": 3, "xb": 3, "xc": 2, "xd": 1}
"""Queue a's workflows, in the order they are created, and their tasks of 1 CPU."""
TEMPLATE = {
    "spec": {
        "terminationGracePeriodSeconds": GRACE,
        "containers": [
            {"name": "task", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
        ],
    }
}
DECLARED = 100_000.0
"""The seconds each of queue a's tasks declares in the owner's case. The ending rule spares
a task that has run more than twice what its stop saves, at most what the tasks have left
(`idlegate.sim.reclaim_patience`): declaring 300 s, a setup slower than about 10 s of
wall time on a loaded machine ran them past that, and nothing was evicted; declaring
1,200 s, a setup slower than about 40 s would have. Declaring this much, none is near its
end however slow the setup: the first runs last until the test ends them (`UNTIL_TOLD`,
once the owner succeeded), a stopped task's re-run for `RERUN` seconds. Where pods run
what they declare, and no test can end one (KWOK, tests/real), they declare `RUN`."""
RERUN = 60.0
RUN = 1200.0
"""What queue a's tasks declare and run where no test can end them: a minute of wall time
at `SPEED`, so only a setup slower than about 40 s (800 s on the accelerated clock) runs
them near enough to their end that the ending rule spares them."""
KEEP_XD = {
    "metadata": {"name": "keep-xd"},
    "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {LABEL_WORKFLOW: "xd"}}},
}


class Deletions:
    """The pods of `namespace` idlegate marked for a stop (`ANNOTATION_STOP`), and each
    one the moment it is marked for deletion (its body then), as the API server writes
    them (an emulator subscriber: no write is missed)."""

    def __init__(self, api: ApiServer, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.stops: set[str] = set()
        self.marked: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._unsubscribe = api.subscribe(self._on_event)

    def _on_event(self, res: kmock.resource, etype: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if res != PODS or meta.get("namespace") != self.namespace:
            return
        with self._lock:
            if ANNOTATION_STOP in (meta.get("annotations") or {}):
                self.stops.add(meta["name"])
            if meta.get("deletionTimestamp") and meta["name"] not in self.marked:
                self.marked[meta["name"]] = obj

    def close(self) -> None:
        self._unsubscribe()


@pytest.fixture()
def nodes(api: ApiServer) -> None:
    """Three Nodes of 3 CPUs labelled for the pool (the module's API server keeps them)."""
    for i in range(3):
        if api.get(NODES, None, f"node-{i}") is None:
            api.create(NODES, node(f"node-{i}", cpu="3", memory="12Gi", labels={"pool": "batch"}))


def node_of(api: ApiServer, ns: str, pod: str) -> str | None:
    return ((api.get(PODS, ns, pod) or {}).get("spec") or {}).get("nodeName")


def pods_of(name: str) -> list[str]:
    return [f"{name}-a-{i}" for i in range(LENT[name])]


def lending(reclaim: str) -> dict[str, Any]:
    """The operator's settings: a pool of 20 pods on the nodes labelled ``pool=batch``,
    queue a of 4 of their CPUs and queue b of 5 (its `reclaim` setting)."""
    queues = [
        {"name": "a", "nominal": {"cpu": "4"}},
        {"name": "b", "nominal": {"cpu": "5"}, "preemption": {"reclaim": reclaim}},
    ]
    return {"pool": 20, "queues": QueueFile(queues_from(queues)), "pool_nodes": "pool=batch"}


def create(api: ApiServer, ns: str, name: str, queue: str, tasks: int, seconds: float) -> None:
    body = workflow(name, stage("a", tasks, seconds, template=TEMPLATE))
    body["spec"]["queueName"] = queue
    api.create(DWF, body, namespace=ns)


def test_the_owners_pod_gets_a_node_by_evicting_the_cheapest_task_there_a_budget_allows(
    api: ApiServer, ns: str, kubelet: SimKubelet, nodes: None
) -> None:
    lent = {p for name in LENT for p in pods_of(name)}
    kubelet.stop_seconds = 5.0  # (a task saving its progress: within its grace period)

    def durations(pod: Any) -> float:  # (the first runs until told, a re-run for RERUN)
        declared = duration_of(pod)
        if declared < DECLARED:
            return declared
        return UNTIL_TOLD if pod["metadata"]["name"] in lent else RERUN

    told = hasattr(kubelet, "finish")  # (else KWOK: a pod runs what it declares)
    declared = DECLARED if told else RUN
    kubelet.durations = durations
    clock = ScaledClock(SPEED)
    monitor, deletions = PodMonitor(api, ns), Deletions(api, ns)
    try:
        with running_operator(api, ns, clock=clock, **lending("Any")):
            # queue a's tasks declare so much that none is spared as near its end (the
            # ending rule) however slow this setup is (`DECLARED`; on KWOK, `RUN`)
            for name, tasks in LENT.items():
                create(api, ns, name, "a", tasks, declared)
                wait(lambda n=name: running(api, ns, *pods_of(n)), 30, f"{name}'s tasks running")
            third = node_of(api, ns, "xd-a-0")
            assert {node_of(api, ns, p) for p in pods_of("xc")} == {third}
            api.create("poddisruptionbudgets", KEEP_XD, namespace=ns)
            # every lent task older than the reclaim's grace (60 s), so none is spared for
            # being young: the choice is the least work lost alone
            since = clock.now()
            wait(lambda: clock.now() > since + 61, 30, "the lent tasks past their grace")
            create(api, ns, "y", "b", 1, 5)
            owner = wait_phase(api, ns, "y", ("Succeeded", "Failed"), timeout=60)
            owners_node = node_of(api, ns, "y-a-0")
            if told:
                kubelet.finish(*(p for p in sorted(lent) if running(api, ns, p)))
            ended = {n: wait_phase(api, ns, n, ("Succeeded", "Failed"), 120) for n in LENT}
    finally:
        monitor.close()
        deletions.close()
    assert owner["phase"] == "Succeeded"
    assert all(s["phase"] == "Succeeded" and s["stages"][0]["failed"] == 0 for s in ended.values())
    # xd's task, the cheapest, was asked first; the budget kept its pod (its mark taken
    # off), and one of xc's, on the same node, went instead
    (evicted,) = [p for p in deletions.marked if p in lent]
    assert evicted in pods_of("xc") and "xd-a-0" not in deletions.marked
    assert deletions.stops == {"xd-a-0", evicted}
    assert owners_node == third  # (the owner's pod fits where the eviction freed room)
    kept = api.get(PODS, ns, "xd-a-0")
    assert kept is None or ANNOTATION_STOP not in kept["metadata"]["annotations"]
    # evicted with its grace period, stopped by the kubelet within it (exit 143)
    assert int(deletions.marked[evicted]["metadata"]["deletionGracePeriodSeconds"]) == GRACE
    said = [e for e in events_of(api, ns, "xc") if e["reason"] == "Preempted"]
    assert len(said) == 1 and "queue 'b' (Reclaim)" in said[0]["message"]
    assert not any(
        e["reason"] == "Preempted" for n in ("xa", "xb", "xd") for e in events_of(api, ns, n)
    )
    reruns = [n for n in monitor.created if n.endswith("-r1")]
    assert reruns == [f"{evicted}-r1"] and not monitor.duplicates


def test_with_reclaim_off_nothing_is_evicted_and_the_owner_waits_for_a_task_to_end(
    api: ApiServer, ns: str, kubelet: SimKubelet, nodes: None
) -> None:
    kubelet.stop_seconds = 5.0
    monitor, deletions = PodMonitor(api, ns), Deletions(api, ns)
    try:
        with running_operator(api, ns, **lending("Never")):
            for name, tasks in LENT.items():
                create(api, ns, name, "a", tasks, 60.0)
            wait(lambda: running(api, ns, *pods_of("xd")), 30, "queue a's tasks running")
            create(api, ns, "y", "b", 1, 5)
            ended = {n: wait_phase(api, ns, n, ("Succeeded", "Failed"), 120) for n in [*LENT, "y"]}
    finally:
        monitor.close()
        deletions.close()
    assert all(s["phase"] == "Succeeded" for s in ended.values())
    assert not deletions.stops and not deletions.marked
    assert not [n for n in monitor.created if n.endswith("-r1")]
    assert not any(e["reason"] == "Preempted" for n in LENT for e in events_of(api, ns, n))
