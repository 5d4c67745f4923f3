"""The resource rule of the cluster state machine (`sim.cluster`'s header): a task starts
only where its demand fits the free capacity, a gang only where all its tasks fit, and a
pods-only pool is the executors it always was."""

from __future__ import annotations

import dataclasses

import pytest

from idlegate.errors import DemandTooLargeError, IdlegateError, IllegalDecisionError
from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import JobArrival, Workload, simulate
from idlegate.sim.metrics import run_metrics
from idlegate.sim.protocol import Decision
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

R = ResourceVector.parse


def stages(*specs: dict) -> Dag:
    return Dag.from_spec(parse_workflow({"stages": list(specs)}))


def stage(name: str, tasks: int, resources: dict | None = None, **more) -> dict:
    out = {"name": name, "tasks": tasks, "taskDurationSeconds": 10, **more}
    if resources is not None:
        out["resources"] = resources
    return out


def test_tasks_start_only_while_their_demand_fits():
    c = Cluster(10, resources=R("cpu=4,memory=8Gi"))
    job = c.add_job(stages(stage("a", 5, {"cpu": "1500m", "memory": "1Gi"})), 0.0)
    launches = c.apply(Decision(job.stages[0], 10), 0.0)
    assert len(launches) == 2  # 3 CPUs of 4 taken; a third task would need 4.5
    assert c.free_executors == 8
    assert c.free_resources == R("cpu=1,memory=6Gi,pods=8")
    assert c.runnable_stages() == [] and not c.can_schedule()
    with pytest.raises(IllegalDecisionError, match=r"needs cpu=1500m,memory=1Gi per task"):
        c.apply(Decision(job.stages[0], 10), 0.0)
    # a task that ends frees its demand: the executor goes on with the stage, keeping it
    assert c.task_finished(launches[0].executor, 10.0) is job.stages[0]
    assert c.free_resources == R("cpu=1,memory=6Gi,pods=8")


def test_a_small_stage_starts_beside_one_that_does_not_fit():
    c = Cluster(10, resources=R("cpu=4"))
    big = c.add_job(stages(stage("big", 3, {"cpu": "3"})), 0.0)
    small = c.add_job(stages(stage("small", 4, {"cpu": "500m"})), 0.0)
    c.apply(Decision(big.stages[0], 10), 0.0)  # one task of 3 CPUs
    assert [s.name for s in c.runnable_stages()] == ["small"]
    assert len(c.apply(Decision(small.stages[0], 10), 0.0)) == 2
    assert c.free_resources["cpu"] == 0 and not c.can_schedule()
    c.task_finished(0, 10.0)  # big's executor goes on with big: still 0 free
    assert c.free_resources["cpu"] == 0


def test_a_gang_starts_only_when_all_its_tasks_fit():
    c = Cluster(10, resources=R("cpu=4"))
    other = c.add_job(stages(stage("x", 1, {"cpu": "1"})), 0.0)
    gang = c.add_job(stages(stage("g", 2, {"cpu": "2"}, gang=True)), 0.0)
    assert {s.name for s in c.runnable_stages()} == {"x", "g"}
    c.apply(Decision(other.stages[0], 1), 0.0)
    assert [s.name for s in c.runnable_stages()] == []  # 3 free CPUs, the gang needs 4
    with pytest.raises(IllegalDecisionError, match=r"needs 2 executors at once.*free resources"):
        c.apply(Decision(gang.stages[0], 2), 0.0)
    c.task_finished(0, 10.0)
    assert [s.name for s in c.runnable_stages()] == ["g"]
    assert len(c.apply(Decision(gang.stages[0], 2), 10.0)) == 2


def test_a_stage_that_can_never_fit_is_refused_on_arrival():
    c = Cluster(10, resources=R("cpu=8,memory=32Gi,nvidia.com/gpu=1"))
    with pytest.raises(
        DemandTooLargeError,
        match=r"stage 'train' of j needs memory=1Gi,nvidia.com/gpu=2 at once, more "
        r"nvidia.com/gpu than the pool has \(its resources: cpu=8,memory=32Gi,"
        r"nvidia.com/gpu=1\), so it could never start",
    ):
        c.add_job(stages(stage("train", 1, {"nvidia.com/gpu": 2, "memory": "1Gi"})), 0.0, "j")
    with pytest.raises(DemandTooLargeError, match=r"needs cpu=12 at once \(3 tasks of cpu=4\)"):
        c.add_job(stages(stage("g", 3, {"cpu": 4}, gang=True)), 0.0, "j")
    assert c.jobs == []


def test_a_pods_only_pool_ignores_requests():
    """`--pool-size N`: every task is one executor, whatever it requests."""
    c = Cluster(2)
    job = c.add_job(stages(stage("a", 3, {"cpu": "64", "nvidia.com/gpu": 8})), 0.0)
    assert len(c.apply(Decision(job.stages[0], 2), 0.0)) == 2
    assert c.capacity == R("pods=2") and c.resource_names == ()


def test_pods_in_the_resources_must_match_the_executors():
    assert Cluster(4, resources=R("pods=4,cpu=2")).capacity == R("cpu=2,pods=4")
    with pytest.raises(IdlegateError, match=r"resources say pods=3, but it has 4 executors"):
        Cluster(4, resources=R("pods=3"))


def test_removing_a_job_and_forking_keep_the_free_resources():
    c = Cluster(10, resources=R("cpu=4"))
    job = c.add_job(stages(stage("a", 4, {"cpu": "1"})), 0.0)
    c.apply(Decision(job.stages[0], 3), 0.0)
    twin = c.fork()
    assert twin.free_resources == c.free_resources == R("cpu=1,pods=7")
    (copy,) = twin.jobs
    assert len(twin.apply(Decision(copy.stages[0], 4), 0.0)) == 1
    assert twin.runnable_stages() == [] and c.runnable_stages() == [job.stages[0]]
    twin.task_finished(0, 10.0)
    c.remove_job(job, 1.0)
    assert c.free_resources == R("cpu=4,pods=10")
    assert twin.free_resources == R("cpu=1,pods=7")  # (all 4 launched: freed)


def test_a_failed_task_gives_its_demand_back():
    c = Cluster(10, resources=R("cpu=2"))
    job = c.add_job(stages(stage("a", 2, {"cpu": "2"})), 0.0)
    c.apply(Decision(job.stages[0], 2), 0.0)
    assert c.free_resources["cpu"] == 0
    c.task_failed(0, 1.0)
    assert c.free_resources["cpu"] == 2000


def test_resources_bound_a_simulation_and_never_overflow():
    """fifo on 3 stages of 2 CPUs: at most 2 tasks at once on 4 CPUs, although 10 executors
    are free, so the run takes 2 waves per 4 tasks."""
    dag = stages(stage("a", 4, {"cpu": "2"}))
    pods_only = Workload("w", (JobArrival(0.0, "j", dag),), 10)
    sized = dataclasses.replace(pods_only, resources=R("cpu=4"))
    fifo = make_scheduler("fifo")
    assert simulate(pods_only, fifo).records[0].jct == 10
    result = simulate(sized, fifo, trace=True)
    assert result.records[0].jct == 20
    assert result.trace is not None
    launched = [e[4][0] for e in result.trace if e[1] == "launch"]
    assert max(launched) <= 2
    # 4 tasks x 2 CPUs x 10 s held of 4 CPUs x 20 s; pods-only runs report no such row
    assert result.resource_seconds == {"cpu": 80.0}
    assert run_metrics(result).utilisation_by_resource == {"cpu": 1.0}
    assert run_metrics(result).to_dict()["utilisation_by_resource"] == {"cpu": 1.0}
    plain = run_metrics(simulate(pods_only, fifo))
    assert plain.utilisation_by_resource is None
    assert "utilisation_by_resource" not in plain.to_dict()


def test_held_resources_count_removed_jobs_and_forks():
    c = Cluster(10, resources=R("cpu=4,memory=4Gi"))
    job = c.add_job(stages(stage("a", 2, {"cpu": "1500m"})), 0.0)
    c.apply(Decision(job.stages[0], 2), 0.0)
    c.advance(4.0)
    assert c.resource_seconds == {"cpu": 12.0, "memory": 0.0}
    assert c.fork().resource_seconds == {"cpu": 12.0, "memory": 0.0}
    c.remove_job(job, 6.0)
    c.advance(10.0)
    assert c.resource_seconds == {"cpu": 18.0, "memory": 0.0}


def test_a_jobs_holding_is_what_its_running_tasks_request(monkeypatch):
    """`Job.holding`, kept as tasks start and end (what DRF's dominant share reads), is at
    every question the sum over its stages of their need times their executors."""
    from idlegate.sim.workloads import build_workload

    seen: list[int] = []
    decide_once = Cluster.decide_once

    def checked(cluster: Cluster, scheduler, now):
        for job in cluster.jobs:
            summed = [0] * len(cluster.resource_names)
            for s in job.stages:
                for i, amount in enumerate(s.need.amounts if s.need is not None else ()):
                    summed[i] += amount * s.executors
            assert job.holding == summed, job
            seen.append(job.held)
        return decide_once(cluster, scheduler, now)

    monkeypatch.setattr(Cluster, "decide_once", checked)
    workload = build_workload("k8s-batch", 7, num_jobs=30, requests=True)
    simulate(workload, make_scheduler("fair"), seed=7)
    assert max(seen) > 1
