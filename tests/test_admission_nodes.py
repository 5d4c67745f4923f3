"""The queues' admission on a pool that follows its nodes (issue 80): a task no node can
ever hold reserves nothing past its wait bound, and why a stage waits is said in the
pool's own terms (its nodes' CPU and memory), never in executors that mean nothing there."""

from __future__ import annotations

from typing import Any

import pytest

from idlegate.api.pool_spec import ExecutorPoolSpec
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.admission_result import Reason
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import decision_round
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from tests.test_node_pools import _Live, following, node, pod

pytestmark = pytest.mark.looptime

NODE = ResourceVector.parse("cpu=8,memory=32Gi,pods=110")
BOUND = 60.0


def cpu_job(cpu: str, tasks: int = 1) -> Dag:
    stage = {"name": "s", "tasks": tasks, "taskDurationSeconds": 10, "resources": {"cpu": cpu}}
    return Dag.from_spec(parse_workflow({"stages": [stage]}))


def nodes_of_8_cpu() -> Cluster:
    """The operator's pool on three nodes of 8 CPU, queues a and b of 12 CPU, b's tasks
    bound to wait at most `BOUND` s."""
    cluster = Cluster(330, resources=ResourceVector({"cpu": 1, "memory": 1}))
    cluster.set_capacity(ResourceVector(), ())
    specs = (
        QueueSpec("a", {"cpu": 12000}),
        QueueSpec("b", {"cpu": 12000}, wait_bound=BOUND),
    )
    cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    cluster.set_capacity(ResourceVector.parse("cpu=24,memory=96Gi"), [NODE] * 3, [NODE] * 3)
    return cluster


def in_queue(cluster: Cluster, dag: Dag, q: int, now: float) -> Any:
    job = cluster.add_job(dag, now)
    job.queue = q
    cluster.touch(job)
    return job


def test_a_task_no_node_can_hold_reserves_nothing_past_its_wait_bound():
    cluster, fifo = nodes_of_8_cpu(), make_scheduler("fifo")
    big = in_queue(cluster, cpu_job("12"), 1, 0.0)  # (12 CPU: more than a node has)
    list(decision_round(cluster, fifo, 0.0))
    cluster.advance(BOUND + 10)  # past b's bound, the pool idle
    later = [in_queue(cluster, cpu_job("1"), 1, BOUND + 10) for _ in range(4)]
    list(decision_round(cluster, fifo, BOUND + 10))
    assert [j.held for j in later] == [1, 1, 1, 1]  # (they waited behind it for ever)
    result = cluster.admission_result()
    assert result is not None and result.forced is None
    entry = result.of(big)
    assert entry is not None and entry.reason is Reason.NO_NODE_FITS
    assert entry.message == (
        "stage s asks cpu=12 a task, more than any node of the pool has allocatable "
        "(cpu=8,memory=32Gi): it waits for a node that can hold it, and reserves no room "
        "nor holds any other workflow back meanwhile"
    )
    assert cluster.admission is not None
    assert cluster.admission.may_go_on(later[0].stages[0], BOUND + 10)  # (not held either)


def test_a_task_a_node_could_hold_still_reserves_its_room_past_its_bound():
    # the reservation itself is kept: 6 CPU fits an empty node, so past its bound the
    # smaller tasks that would take its room wait behind it
    cluster, fifo = nodes_of_8_cpu(), make_scheduler("fifo")
    fillers = [in_queue(cluster, cpu_job("3", tasks=2), 0, 0.0) for _ in range(4)]
    list(decision_round(cluster, fifo, 0.0))
    assert sum(j.held for j in fillers) == 6  # (a borrows b's idle CPU): 2 left a node
    wide = in_queue(cluster, cpu_job("6"), 1, 0.0)
    list(decision_round(cluster, fifo, 0.0))  # (its wait begins)
    cluster.advance(BOUND + 10)
    later = [in_queue(cluster, cpu_job("1"), 1, BOUND + 10) for _ in range(2)]
    list(decision_round(cluster, fifo, BOUND + 10))
    result = cluster.admission_result()
    assert result is not None
    entry = result.of(later[0])
    assert entry is not None and entry.reason is Reason.RESERVATION
    assert wide.held == 0 and [j.held for j in later] == [0, 0]


@pytest.mark.asyncio
async def test_the_operator_runs_a_queue_past_a_stage_no_node_can_hold(monkeypatch):
    from idlegate.operator.edge import intake
    from tests.operator_fakes import harness, stage

    h = harness(pool=4)
    following(h, monkeypatch)
    h.pools.watch.nodes = {n: [node(n, cpu="8", memory="32Gi")] for n in "xyz"}
    h.pools.watch.pods = _Live(h.kube)
    queues = [
        {"name": "a", "nominal": {"cpu": 12}},
        {"name": "b", "nominal": {"cpu": 12}, "waitBound": BOUND},
    ]
    raw = {"size": 330, "policy": "fifo", "nodeSelector": {}, "queues": queues}
    spec = ExecutorPoolSpec.model_validate(raw)
    await intake.readmit(h.pools, h.pools.apply("batch", spec))

    async def submit(name: str, cpu: str) -> None:
        body = h.kube.add_workflow(name, {"stages": [stage("s", resources={"cpu": cpu})]})
        body["spec"].update(pool="batch", queueName="b")
        h.admit(body)
        await h.settle()

    await submit("big", "12")
    (said,) = [e["message"] for e in h.kube.events if e["reason"] == "NoNodeFits"]
    assert said.endswith(
        "meanwhile it holds no room, past its queue's wait bound too, and nothing waits for it."
    )
    h.clock.advance(BOUND + 10)
    await h.timers.fire_due(h.clock.now())  # (the bound's round)
    await h.settle()
    for name in ("l1", "l2"):
        await submit(name, "1")
    assert h.released() == ["l1-s-0", "l2-s-0"]


# -- why a stage waits, in the pool's own terms ------------------------------------------------


class Waits:
    """A policy that always answers WAIT (as one waiting for a better moment)."""

    name = "waits"

    def reset(self, rng: Any) -> None:
        pass

    def decide(self, view: Any) -> Any:
        from idlegate.sim.protocol import WAIT

        return WAIT


@pytest.mark.asyncio
async def test_a_stage_no_node_has_room_for_waits_for_that_not_for_the_policy(monkeypatch):
    """Issue 80, item 6: on nodes at 7.75 of 8 CPU the round's WAIT (for a stage that
    fits) was said of a stage of 500m CPU too, with '330 executor(s) stay free'; and Accepted
    counted the pool in executors, which are no room on nodes."""
    from idlegate.api.visibility import waiting_in_order
    from tests.operator_fakes import harness, stage

    h = harness(pool=330, pool_nodes="", scheduler=Waits())
    following(h, monkeypatch)
    h.pools.watch.nodes = {n: [node(n, cpu="8", memory="32Gi")] for n in "xyz"}
    h.pools.watch.pods = live = _Live(h.kube)
    live.extra = {("other", f"o{n}"): pod(f"o{n}", "7750m", n) for n in "xyz"}
    h.pools.nodes_changed()
    await h.submit("small", {"stages": [stage("s", resources={"cpu": "100m"})]})
    await h.submit("big", {"stages": [stage("s", resources={"cpu": "500m"})]})

    def said(workflow: str, reason: str) -> str:
        (event,) = [
            e["message"]
            for e in h.kube.events
            if e["involvedObject"]["name"] == workflow and e["reason"] == reason
        ]
        return event

    free = "cpu=750m,memory=96Gi stay free on its nodes until the next event."
    # (each was accepted into a full pool: its Accepted Event says why it waits, issue 79)
    assert said("small", "Accepted").endswith(
        f"policy waits chose to wait for a better moment; {free}"
    )
    why = (
        "no node has room for its task of cpu=500m now (at most cpu=250m,memory=32Gi free on "
        "any one node, cpu=750m,memory=96Gi on its nodes in all)"
    )
    assert said("big", "Accepted").endswith(
        f". Stage 's' is runnable and waits for an executor: {why}; {free}"
    )
    # the visibility API says the entry's hold the Waiting Event said (one queue, "")
    ((queue, entries),) = waiting_in_order(h.core)
    (big,) = [e for e in entries if e.job.name.endswith("big")]
    assert queue == "" and f"waits for an executor: {big.message}; " in said("big", "Accepted")
    assert said("big", "Accepted").startswith(
        "Accepted: 1 stages, 1 tasks, critical path 10 s, total work 10 executor-seconds; "
        "policy waits, pool of every node (cpu=750m,memory=96Gi now). Stage 's' is runnable"
    )


def test_the_admission_says_a_stage_lacks_node_room_in_cpu_and_memory_not_pods():
    cluster, fifo = nodes_of_8_cpu(), make_scheduler("fifo")
    fillers = [in_queue(cluster, cpu_job("3", tasks=2), 0, 0.0) for _ in range(4)]
    wide = in_queue(cluster, cpu_job("4"), 0, 0.0)
    list(decision_round(cluster, fifo, 0.0))
    assert sum(j.held for j in fillers) == 6  # (2 CPU left a node, 6 in all)
    result = cluster.admission_result()
    entry = None if result is None else result.of(wide)
    assert entry is not None and (entry.reason, entry.message) == (
        Reason.NO_NODE_FITS,
        "no node has room for its task of cpu=4 now (at most cpu=2,memory=32Gi free on any "
        "one node, cpu=6,memory=96Gi on its nodes in all)",
    )
    # queues that quote pods alone: entitled, the free CPU of all the nodes is too little
    cluster = Cluster(330, resources=ResourceVector({"cpu": 1, "memory": 1}))
    cluster.set_capacity(ResourceVector(), ())
    specs = (QueueSpec("a", {"pods": 165_000}), QueueSpec("b", {"pods": 165_000}))
    cluster.admission = Admission(specs, cluster.capacity, cluster.resource_names)
    cluster.set_capacity(ResourceVector.parse("cpu=24,memory=96Gi"), [NODE] * 3, [NODE] * 3)
    fillers = [in_queue(cluster, cpu_job("1"), 0, 0.0) for _ in range(20)]
    list(decision_round(cluster, fifo, 0.0))
    assert sum(j.held for j in fillers) == 20  # (8, 8 and 4 CPU on the nodes)
    wide = in_queue(cluster, cpu_job("5"), 1, 0.0)
    list(decision_round(cluster, fifo, 0.0))
    result = cluster.admission_result()
    entry = None if result is None else result.of(wide)
    assert entry is not None and (entry.reason, entry.message) == (
        Reason.FREE_RESOURCES,
        "its task of cpu=5 needs more than its nodes have free in all (cpu=4 free)",
    )
