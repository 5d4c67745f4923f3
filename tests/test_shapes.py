"""`Cluster.can_schedule`'s index of runnable stages by shape (`idlegate.sim.shapes`): the
answer of asking every runnable stage, at the cost of the jobs that changed."""

from __future__ import annotations

import pytest

import idlegate.sim.shapes as shapes_module
from benchmarks.forecast import waiting_pool
from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import simulate
from idlegate.sim.forecast import forecast
from idlegate.sim.protocol import Decision, launchable
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload
from tests.helpers import batch_on_nodes


def one_stage(cpu: str, tasks: int = 1, gang: bool = False) -> Dag:
    stage = {"name": "a", "tasks": tasks, "taskDurationSeconds": 10, "gang": gang}
    return Dag.from_spec(parse_workflow({"stages": [{**stage, "resources": {"cpu": cpu}}]}))


def every_stage_asked(cluster: Cluster) -> bool:
    """`can_schedule`'s answer the long way: each runnable stage of every job asked."""
    free = cluster.free_executors
    if free == 0 or cluster.beyond:
        return False
    return any(launchable(s, free) for j in cluster.jobs for s in j.runnable)


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every `can_schedule` of a pool without queues compared with `every_stage_asked`;
    the answers, to show both kinds were seen."""
    answers: list[bool] = []
    indexed = Cluster.can_schedule

    def both(cluster: Cluster) -> bool:
        answer = indexed(cluster)
        if cluster.admission is None:
            assert answer == every_stage_asked(cluster), f"at {cluster.now}"
            answers.append(answer)
        return answer

    monkeypatch.setattr(Cluster, "can_schedule", both)
    return answers


@pytest.mark.parametrize("scheduler", ["fair", "srpt", "random"])
@pytest.mark.parametrize("nodes", [0, 4])
def test_the_index_answers_as_asking_every_runnable_stage(checked, scheduler, nodes):
    """On a pool of resources, with and without nodes, under rules that leave different
    stages waiting: each question's answer is the long way's."""
    workload = batch_on_nodes(5, 40, nodes)
    simulate(workload, make_scheduler(scheduler), seed=5)
    assert True in checked and False in checked


def test_the_index_answers_as_asking_every_runnable_stage_with_gangs_and_idle_slots(checked):
    """Gang stages (a shape per tasks left) and idle slots (a stage leaves the runnable
    ones and comes back) on a pods-only pool."""
    workload = build_workload("synthetic", 2, num_jobs=30)
    simulate(workload, make_scheduler("sjf-cp"), seed=2)
    cluster = Cluster(4)
    gang = cluster.add_job(one_stage("1", tasks=3, gang=True), 0.0)
    other = cluster.add_job(one_stage("1", tasks=2), 0.0)
    cluster.apply(Decision(other.stages[0], 2), 0.0)  # 2 of 4 free: the gang of 3 waits
    assert not cluster.can_schedule()
    cluster.apply(Decision(gang.stages[0], 3, idle_delay=5.0), 0.0)
    cluster.task_finished(0, 1.0)
    cluster.task_finished(1, 1.0)
    assert not cluster.can_schedule()  # (the gang idles)
    cluster.idle_expired(gang.stages[0], 5.0)
    assert cluster.can_schedule()
    assert True in checked and False in checked


def test_a_question_reads_only_the_jobs_that_changed(monkeypatch):
    """With 2,000 workflows waiting on a full pool, the first question reads each once;
    after a task ends, the next reads only that task's job, not the 2,000."""
    cluster = Cluster(4000, resources=ResourceVector.parse("cpu=8"))
    running = cluster.add_job(one_stage("4", tasks=2), 0.0)
    cluster.apply(Decision(running.stages[0], 2), 0.0)  # the pool's 8 CPUs taken
    for _ in range(2000):
        cluster.add_job(one_stage("4"), 0.0)
    read: list[object] = []
    shape = shapes_module.shape
    monkeypatch.setattr(shapes_module, "shape", lambda s: read.append(s) or shape(s))
    assert not cluster.can_schedule() and len(read) == 2000
    read.clear()
    assert not cluster.can_schedule() and read == []
    assert cluster.task_finished(0, 10.0) is None  # 4 CPUs free
    assert cluster.can_schedule() and read == []
    cluster.apply(Decision(cluster.jobs[1].stages[0], 1), 10.0)
    assert not cluster.can_schedule() and read == []  # (the job launched left the index)
    cluster.task_finished(1, 11.0)  # the running job completes: it leaves
    assert cluster.can_schedule() and read == []


def test_a_forked_cluster_keeps_its_own_index():
    """A planner's fork reads its own jobs; what runs on it leaves the original's answer."""
    cluster = Cluster(2, resources=ResourceVector.parse("cpu=4"))
    job = cluster.add_job(one_stage("4", tasks=2), 0.0)
    assert cluster.can_schedule()
    twin = cluster.fork()
    twin.apply(Decision(twin.jobs[0].stages[0], 2), 0.0)
    assert not twin.can_schedule() and cluster.can_schedule()
    cluster.apply(Decision(job.stages[0], 1), 0.0)
    assert not cluster.can_schedule()


def test_the_index_answers_as_asking_every_runnable_stage_on_a_told_pools_replay(checked):
    """A replay of a pool whose nodes are told as the operator's driver tells them
    (`benchmarks/forecast.py`'s ``told``), where most shapes ask more than any node has
    free: each question's answer is the long way's."""
    cluster, replayed = waiting_pool(40, "fair", "told")
    forecast(cluster, make_scheduler(replayed), seed=0, replays=1)
    assert True in checked and False in checked


def test_a_full_pool_asks_only_the_shapes_within_its_bound(monkeypatch):
    """Ten shapes wait on a pool with 2 CPUs free: the question asks none of those asking
    more (the bound refuses them, smallest first, and stops at the first beyond it), and
    asks the one of 2 CPUs, which fits."""
    cluster = Cluster(100, resources=ResourceVector.parse("cpu=20"))
    running = cluster.add_job(one_stage("18"), 0.0)
    cluster.apply(Decision(running.stages[0], 1), 0.0)
    for cpu in range(3, 13):
        cluster.add_job(one_stage(str(cpu)), 0.0)
    asked: list[object] = []
    real = shapes_module.launchable
    monkeypatch.setattr(shapes_module, "launchable", lambda s, f: asked.append(s) or real(s, f))
    assert not cluster.can_schedule() and asked == []
    small = cluster.add_job(one_stage("2"), 0.0)
    assert cluster.can_schedule() and asked == small.stages[:1]
