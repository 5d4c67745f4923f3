"""The baselines on a resource pool (`idlegate.policy.drf`): DRF `fair`, `srpt` and
`sjf-cp` weighing work by demand, known answers on hand-built 3-4 stage workflows; and
on a pods-only pool the executor counts they always had."""

from __future__ import annotations

import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.drf import (
    cap_for_share,
    dominant_share,
    pool_capacity,
    task_share,
    weighted_remaining_cp,
    weighted_remaining_work,
)
from idlegate.sim.cluster import Cluster
from idlegate.sim.protocol import Decision
from idlegate.sim.resources import ResourceVector
from tests.helpers import cpu_diamond as diamond
from tests.helpers import cpu_stage as stage
from tests.helpers import spec_dag as dag

R = ResourceVector.parse


# the diamond (tests.helpers.cpu_diamond): on 10 executors and 8 CPUs, task shares 1/2, 1/8, 1/10 and 1


def test_task_shares_and_the_weighted_work_of_a_diamond():
    c = Cluster(10, resources=R("cpu=8"))
    job = c.add_job(diamond(), 0.0)
    capacity = pool_capacity(c)
    assert capacity == (8000,)
    assert [task_share(s, 10, capacity) for s in job.stages] == [0.5, 0.125, 0.1, 1.0]
    # 2·10·½ + 20·⅛ + 3·5·0.1 + 4·1
    assert weighted_remaining_work(job, 10, capacity) == pytest.approx(18.0)
    # a-b-d: 5 + 2.5 + 4 = 11.5 (a-c-d: 5 + 0.5 + 4 = 9.5)
    assert weighted_remaining_cp(job, 10, capacity) == pytest.approx(11.5)
    c.apply(Decision(job.stages[0], 10), 0.0)
    assert dominant_share(job, 10, capacity) == 1.0  # 2 tasks of 4 CPUs: all 8
    c.task_finished(0, 10.0)
    c.task_finished(1, 10.0)  # a complete: b-d is left of the critical path
    assert weighted_remaining_work(job, 10, capacity) == pytest.approx(8.0)
    assert weighted_remaining_cp(job, 10, capacity) == pytest.approx(6.5)


def test_a_pods_only_pool_is_not_measured():
    assert pool_capacity(Cluster(10)) is None


def test_srpt_weighs_remaining_work_by_demand():
    """One 10 s task of the whole pool's CPUs against 8 tasks of 5 s and 0.1 CPU: 10 against
    40 executor-seconds, but 10 against 4 pool-seconds (each small task takes one pod of 10)."""
    big = dag(stage("x", 1, 10, "8"))
    small = dag(stage("s1", 4, 5, "100m"), stage("s2", 4, 5, "100m", dependsOn=["s1"]))
    for resources, first in ((None, "x"), (R("cpu=8"), "s1")):
        c = Cluster(10, resources=resources)
        c.add_job(big, 0.0)
        c.add_job(small, 0.0)
        decision = make_scheduler("srpt").decide(c)
        assert isinstance(decision, Decision) and decision.stage.name == first


def test_sjf_cp_weighs_the_critical_path_by_demand():
    """A 10 s task of 8 CPUs against a chain of 2 x 8 s tasks of 0.1 CPU: critical paths of
    10 and 16 s, but 10 and 1.6 pool-seconds."""
    big = dag(stage("x", 1, 10, "8"))
    chain = dag(stage("y1", 1, 8, "100m"), stage("y2", 1, 8, "100m", dependsOn=["y1"]))
    for resources, first in ((None, "x"), (R("cpu=8"), "y1")):
        c = Cluster(10, resources=resources)
        c.add_job(big, 0.0)
        c.add_job(chain, 0.0)
        decision = make_scheduler("sjf-cp").decide(c)
        assert isinstance(decision, Decision) and decision.stage.name == first


def run_round(c: Cluster, scheduler_name: str, **params) -> list[Decision]:
    scheduler = make_scheduler(scheduler_name, **params)
    decisions = []
    while (step := c.decide_once(scheduler, 0.0)) is not None and isinstance(step[0], Decision):
        decisions.append(step[0])
    return decisions


def test_fair_is_dominant_resource_fair_on_a_resource_pool():
    """Two jobs on 10 executors, 8 CPUs and 32 GiB: A's tasks take 2 CPUs (¼ of the pool),
    B's 4 GiB (⅛). Each job's share is ½: A gets 2 tasks (4 CPUs), B 4 (16 GiB), and fair
    waits with 4 executors free, as Decima's fair waits once every job holds its share."""
    c = Cluster(10, resources=R("cpu=8,memory=32Gi"))
    a = c.add_job(dag({"name": "a", "tasks": 4, "taskDurationSeconds": 10,
                       "resources": {"cpu": "2"}}), 0.0)  # fmt: skip
    b = c.add_job(dag({"name": "b", "tasks": 8, "taskDurationSeconds": 10,
                       "resources": {"memory": "4Gi"}}), 0.0)  # fmt: skip
    decisions = run_round(c, "fair")
    assert [(d.stage.name, d.parallelism_cap) for d in decisions] == [("a", 2), ("b", 4)]
    assert (a.held, b.held, c.free_executors) == (2, 4, 4)
    capacity = pool_capacity(c)
    assert capacity is not None
    assert dominant_share(a, 10, capacity) == dominant_share(b, 10, capacity) == 0.5
    # on a pods-only pool the same jobs share executors: A's cap is ceil(10 / 2) = 5, and
    # once its 4 tasks have started B is the one job left with tasks to launch: 10
    pods = Cluster(10)
    pods.add_job(a.dag, 0.0)
    pods.add_job(b.dag, 0.0)
    assert [d.parallelism_cap for d in run_round(pods, "fair")] == [5, 10]


def test_a_cap_for_a_share_counts_the_stage_s_demand_and_the_job_s_holding():
    c = Cluster(10, resources=R("cpu=8,memory=32Gi"))
    job = c.add_job(diamond(), 0.0)
    capacity = pool_capacity(c)
    assert capacity is not None
    a = job.stages[0]
    assert cap_for_share(job, a, 0.5, 10, capacity) == 1  # ½ of 8 CPUs: one 4-CPU task
    assert cap_for_share(job, a, 0.1, 10, capacity) == 1  # under one task: still one
    assert cap_for_share(job, a, 1.0, 10, capacity) == 2
    c.apply(Decision(a, 1), 0.0)
    assert cap_for_share(job, a, 1.0, 10, capacity) == 2  # holds 4 CPUs: one more


def test_weighted_fair_shares_the_pool_by_weights():
    """alpha = -1: shares inversely proportional to remaining work (10 and 30 s of 1-CPU
    tasks, on 4 CPUs and 10 executors): ¾ and ¼ of the pool, 3 CPUs and 1."""
    c = Cluster(10, resources=R("cpu=4"))
    c.add_job(dag(stage("short", 4, 2.5, "1")), 0.0)
    c.add_job(dag(stage("long", 4, 7.5, "1")), 0.0)
    decisions = run_round(c, "weighted-fair")
    assert [(d.stage.name, d.parallelism_cap) for d in decisions] == [("short", 3), ("long", 1)]
