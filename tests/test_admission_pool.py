"""The admission on a pool whose capacity changes (a pool that follows its nodes), and the
quotas such a pool refuses: the cluster tells the admission every capacity it is told."""

from __future__ import annotations

import re

import pytest

from idlegate.api.queueing import cohort_check
from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import decision_round
from idlegate.sim.queues import QueueSpec
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

GPU = re.escape("the pool does not count nvidia.com/gpu")
NODE = ResourceVector.parse("cpu=8,memory=32Gi,pods=110")


def cpu_job() -> Dag:
    stage = {"name": "s", "tasks": 1, "taskDurationSeconds": 10, "resources": {"cpu": "1"}}
    return Dag.from_spec(parse_workflow({"stages": [stage]}))


def node_pool(queues: tuple[QueueSpec, ...]) -> Cluster:
    """The operator's pool on nodes: built naming cpu and memory, no room until its nodes
    are read, its queues attached then (as the operator's core does)."""
    cluster = Cluster(330, resources=ResourceVector({"cpu": 1, "memory": 1}))
    cluster.set_capacity(ResourceVector(), ())
    cluster.admission = Admission(queues, cluster.capacity, cluster.resource_names)
    return cluster


def cpu_queues() -> tuple[QueueSpec, ...]:
    return tuple(QueueSpec(name, {"cpu": 8000}) for name in ("a", "b", "c"))


def test_a_queue_borrows_cpu_on_a_pool_that_follows_its_nodes_once_they_are_read():
    # 3 nodes of 8 CPU, three queues of 8 CPU each; team a floods, b and c are idle: a
    # borrows their idle 16 CPU, as on a `resources` pool of 24 CPU
    cluster = node_pool(cpu_queues())
    cluster.set_capacity(ResourceVector.parse("cpu=24,memory=96Gi"), [NODE] * 3, [NODE] * 3)
    for _ in range(30):
        cluster.add_job(cpu_job(), 0.0).queue = 0
    fair = make_scheduler("fifo")
    list(decision_round(cluster, fair, 0.0))
    assert sum(j.held for j in cluster.jobs) == 24
    assert cluster.admission is not None and cluster.admission.cohort[1] == 24000


def test_the_same_queues_on_a_resources_pool_borrow_alike():
    cluster = Cluster(330, resources=ResourceVector.parse("cpu=24,memory=96Gi"))
    cluster.admission = Admission(cpu_queues(), cluster.capacity, cluster.resource_names)
    for _ in range(30):
        cluster.add_job(cpu_job(), 0.0).queue = 0
    list(decision_round(cluster, make_scheduler("fifo"), 0.0))
    assert sum(j.held for j in cluster.jobs) == 24


def test_a_node_removed_shrinks_the_cohort_the_queues_borrow_from():
    cluster = node_pool(cpu_queues())
    cluster.set_capacity(ResourceVector.parse("cpu=24,memory=96Gi"), [NODE] * 3, [NODE] * 3)
    cluster.set_capacity(ResourceVector.parse("cpu=16,memory=64Gi"), [NODE] * 2, [NODE] * 2)
    assert cluster.admission is not None and cluster.admission.cohort[1] == 16000


def test_a_gpu_quota_is_refused_on_a_node_pool_without_gpu_as_on_a_resources_pool():
    gpu = (QueueSpec("a", {"nvidia.com/gpu": 1000}),)
    with pytest.raises(IdlegateError, match=GPU):
        cohort_check(gpu, 10, ResourceVector.parse("cpu=24"))
    with pytest.raises(IdlegateError, match=GPU):
        cohort_check(gpu, 10, None, counted=("cpu", "memory"))
    with pytest.raises(IdlegateError, match=GPU):
        node_pool(gpu)  # (the state machine's own admission refuses it too)
    cohort_check(gpu, 10, None, counted=("cpu", "memory", "nvidia.com/gpu"))


def test_a_job_moved_to_another_queue_leaves_the_first_ones_index():
    cluster = Cluster(4)
    specs = (QueueSpec("a", {"pods": 2000}), QueueSpec("b", {"pods": 2000}))
    cluster.admission = Admission(specs, cluster.capacity, ())
    jobs = [cluster.add_job(Dag(("s",), (1,), (10.0,), ((),), ((),), (False,)), 0.0) for _ in "xy"]
    assert cluster.admission_result() is not None
    jobs[1].queue = 1
    cluster.touch(jobs[1])  # (a driver that moves a job says so)
    result = cluster.admission_result()
    assert result is not None
    assert [[w.job for w in q.waiting] for q in result.queues] == [[jobs[0]], [jobs[1]]]
    snapshot = cluster.admission.snapshot
    assert snapshot.members(0) == [jobs[0]] and snapshot.members(1) == [jobs[1]]
    view = {"num_executors": 2, "jobs": [jobs[0]], "free_executors_from": lambda self, j: 0}
    pool = type("Pool", (), view)()
    assert snapshot.shares[0].active(pool, ()) == 1  # (only its own job left in a's index)
