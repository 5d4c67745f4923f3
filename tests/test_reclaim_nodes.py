"""A reclaim on nodes a driver tells (issue 82, the operator's ``nodeSelector`` pools): the
state machine told each node's free room and where each running task runs (`TasksOnNodes`)
chooses its victims on one node, where the owner's task then fits, as the simulator's
nodes do (`idlegate.sim.reclaim_plan`, *On nodes*)."""

from __future__ import annotations

from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.pool import Allows, TasksOnNodes
from idlegate.sim.protocol import Decision
from idlegate.sim.queues import Preemption, QueueSpec
from idlegate.sim.reclaim_plan import Reclaim
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

R = ResourceVector.parse
NOW = 1000.0
STARTS = ((895.0, 0.0, 0.0), (890.0, 100.0, 100.0), (880.0, 875.0, 870.0))
"""When each node's three tasks of 1 CPU started: the two newest of all (895, 890) are on
two nodes; of any one node's two, node 2's lose least (120 + 125 s)."""
NODE = R("cpu=3,pods=110")


def one_task(cluster: Cluster, now: float, cpu: str, queue: int, seconds: float = 1e5):
    spec = {"name": "a", "tasks": 1, "taskDurationSeconds": seconds, "resources": {"cpu": cpu}}
    job = cluster.add_job(Dag.from_spec(parse_workflow({"stages": [spec]})), now)
    job.queue = queue
    return job


def told(
    cluster: Cluster,
    free: str,
    where: dict[int, int] | None,
    stopping: tuple = (),
    allows: Allows | None = None,
) -> None:
    """The driver tells three nodes of 3 CPU, each with `free` room, its tasks `where` it
    says (None: it does not say), the room pods being stopped hold on each, and which
    nodes each stage's task may use (`allows`; None: any)."""
    placed = None if where is None else TasksOnNodes(where.get, stopping)
    hosts = ("n0", "n1", "n2")
    cluster.set_capacity(R("cpu=9"), (R(free),) * 3, (NODE,) * 3, hosts, allows, placed)


def lent_pool(
    where: bool = True, allows: Allows | None = None
) -> tuple[Cluster, list[Reclaim], dict[int, int]]:
    """Queue a (half the 9 CPUs) runs nine tasks on three nodes, b's idle half lent to it;
    at `NOW` b's task of 2 CPU comes: no node has it free. The plans' stops are handed."""
    queues = (
        QueueSpec("a", {"cpu": 4500}),
        QueueSpec("b", {"cpu": 4500}, preemption=Preemption(reclaim="Any")),
    )
    cluster = Cluster(20, resources=R("cpu=1m"))
    cluster.set_capacity(ResourceVector(), ())  # (as the operator builds a pool on nodes)
    cluster.admission = Admission(queues, cluster.capacity, cluster.resource_names)
    told(cluster, "cpu=3,pods=110", {})
    runs = sorted((start, n) for n, starts in enumerate(STARTS) for start in starts)
    placed: dict[int, int] = {}
    for start, n in runs:
        job = one_task(cluster, start, "1", queue=0)
        (launch,) = cluster.apply(Decision(job.stages[0], 1), start)
        placed[launch.executor] = n
    told(cluster, "pods=107", placed if where else None, allows=allows)
    handed: list[Reclaim] = []
    cluster.stopper = handed.append
    one_task(cluster, NOW, "2", queue=1, seconds=5.0)
    return cluster, handed, placed


def test_the_victims_are_on_the_one_node_where_the_owners_task_fits_losing_least():
    cluster, handed, placed = lent_pool()
    cluster.decide_once(make_scheduler("fifo"), NOW)
    (plan,) = handed
    starts = {e: cluster._task_start[e] for e in placed}
    # not the two newest of the pool (895 on node 0, 890 on node 1: no node's room): node
    # 2's two newest, 245 executor-seconds lost; the spares (tried if an eviction is
    # refused) are the candidates read on that node only, not node 0's and 1's
    assert {placed[e] for e in plan.executors} == {2}
    assert sorted(starts[e] for e in plan.executors) == [875.0, 880.0]
    assert plan.lost == 245.0 and plan.queue == "b"
    assert [starts[e] for e in plan.spare] == [870.0]


def test_a_stopped_tasks_room_held_while_its_pod_ends_is_not_asked_for_again():
    cluster, handed, placed = lent_pool()
    scheduler = make_scheduler("fifo")
    cluster.decide_once(scheduler, NOW)
    (plan,) = handed
    cluster.stop(plan.executors, NOW + 1, plan.starts)  # (the evictions taken)
    left = {e: n for e, n in placed.items() if e not in plan.executors}
    # node 2's pods still end within their grace period: the driver says what they hold
    told(cluster, "pods=107", left, (ResourceVector(),) * 2 + (R("cpu=2,pods=2"),))
    cluster.needs_schedule = True
    cluster.decide_once(scheduler, NOW + 2)
    assert len(handed) == 1 and cluster.preempted == 2
    # without that room said, the owner's task would look unplaced and stop two more
    told(cluster, "pods=107", left)
    cluster.needs_schedule = True
    cluster.decide_once(scheduler, NOW + 3)
    assert len(handed) == 2


def test_the_victims_are_on_a_node_the_owners_task_may_use():
    # the owner's pod may not go to node 2 (its nodeSelector, say): node 1's two cheapest
    # go, 110 + 900 s, not node 2's (245 s), whose room it could not use
    owners = lambda s: ((0, 1), "") if s.demand["cpu"] == 2000 else None  # noqa: E731
    cluster, handed, placed = lent_pool(allows=owners)
    cluster.decide_once(make_scheduler("fifo"), NOW)
    (plan,) = handed
    assert {placed[e] for e in plan.executors} == {1} and plan.lost == 1010.0


def test_told_nodes_whose_tasks_are_not_placed_stop_nothing():
    cluster, handed, _ = lent_pool(where=False)
    cluster.decide_once(make_scheduler("fifo"), NOW)
    assert not handed
