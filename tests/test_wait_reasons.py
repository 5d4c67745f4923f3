"""Issue 93, item 2: a queue within its quota that waits for room its quota lends says which
resource is short (even at 0 free) and that its quota is lent to the queues that borrow
it, under each reclaim setting; the visibility API and the Waiting Event read the same."""

from __future__ import annotations

import pytest

from idlegate.api.notices import waiting
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.admission_result import Reason
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import decision_round
from idlegate.sim.queues import queues_from
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

NODE = ResourceVector.parse("cpu=8,memory=32Gi,pods=110")


def job() -> Dag:
    one = {"cpu": "1", "memory": "1Gi"}
    stage = {"name": "s", "tasks": 1, "taskDurationSeconds": 10, "resources": one}
    return Dag.from_spec(parse_workflow({"stages": [stage]}))


@pytest.mark.parametrize("reclaim", ["Never", "Any"])
def test_a_queue_within_its_quota_names_the_cpu_short_and_the_queues_it_lends_to(reclaim):
    """The issue's pool: 3 nodes of 8 CPU, queues a, b, c of 8 CPU borrowing up to 4; a and
    c took all 24 CPU. b's workflow said the nodes lacked memory (72Gi free)."""
    raw = [
        {"name": n, "nominal": {"cpu": 8}, "borrowingLimit": {"cpu": 4}}
        | {"preemption": {"reclaim": reclaim}}
        for n in "abc"
    ]
    cluster = Cluster(330, resources=ResourceVector({"cpu": 1, "memory": 1}))
    cluster.set_capacity(ResourceVector(), ())
    cluster.admission = Admission(queues_from(raw), cluster.capacity, cluster.resource_names)
    cluster.set_capacity(ResourceVector.parse("cpu=24,memory=96Gi"), [NODE] * 3, [NODE] * 3)
    fifo = make_scheduler("fifo")
    for q in (0, 2):
        for _ in range(12):
            cluster.add_job(job(), 0.0).queue = q
    list(decision_round(cluster, fifo, 0.0))
    b = cluster.add_job(job(), 1.0)
    b.queue = 1
    cluster.touch(b)
    list(decision_round(cluster, fifo, 1.0))
    entry = cluster.admission_result().of(b)
    assert entry is not None and entry.reason is Reason.FREE_RESOURCES
    comes = "it comes back as their borrowed tasks end"
    comes += (
        " (its preemption's reclaim is Never)"
        if reclaim == "Never"
        else " or are stopped (reclaim: Any; none is stopping now)"
    )
    assert entry.message == (
        "its task of cpu=1,memory=1Gi needs more than its nodes have free in all (cpu=0 free); "
        "queue b is within its nominal quota (cpu 0/8 used) and lends the rest to queue(s) "
        f"a, c, which borrow beyond theirs: {comes}"
    )
    _kind, _reason, message = waiting(b.stages[0], cluster, entry.holds[b.stages[0]])
    assert "memory=72Gi)" not in message and "(cpu=0 free)" in message


def test_a_pool_without_queues_names_the_resource_short_and_lends_nothing():
    cluster = Cluster(330, resources=ResourceVector.parse("cpu=2,memory=8Gi"))
    jobs = [cluster.add_job(job(), 0.0) for _ in range(3)]
    list(decision_round(cluster, make_scheduler("fifo"), 0.0))
    entry = cluster.admission_result().of(jobs[2])
    assert entry is not None
    assert entry.message == (
        "its task of cpu=1,memory=1Gi needs more than the pool has free in all (cpu=0 free)"
    )
