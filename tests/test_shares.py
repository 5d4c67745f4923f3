"""`fair` on a resource pool asks the cluster's index of dominant shares (`sim.shares`):
the answer of its pass over every job, at the cost of the jobs that changed."""

from __future__ import annotations

from dataclasses import replace
from math import inf

import pytest

import idlegate.policy.heuristics as heuristics
import idlegate.sim.shares as shares_module
from benchmarks.forecast import waiting_pool
from idlegate.policy import make_scheduler
from idlegate.policy.drf import pool_capacity
from idlegate.policy.heuristics import FairScheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.engine import simulate
from idlegate.sim.forecast import forecast
from idlegate.sim.pool import identical_nodes, nodes_total
from idlegate.sim.protocol import WAIT, Decision
from idlegate.sim.resources import ResourceVector
from idlegate.sim.shares import NONE_FITS, Shares, dominant_share, floors
from idlegate.sim.spec import parse_workflow
from idlegate.sim.workloads import build_workload
from tests.helpers import batch_on_nodes


def one_stage(cpu: str, tasks: int = 1) -> Dag:
    stage = {"name": "a", "tasks": tasks, "taskDurationSeconds": 10, "resources": {"cpu": cpu}}
    return Dag.from_spec(parse_workflow({"stages": [stage]}))


@pytest.fixture
def both_ways(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every question `fair` answers from the index compared with its pass over every job
    (`_decide_drf`); the answers."""
    answers: list[object] = []
    indexed = FairScheduler.decide

    def both(self: FairScheduler, view: Cluster) -> object:
        answer = indexed(self, view)
        capacity = pool_capacity(view)
        active = [j for j in view.jobs if j.unlaunched > 0]
        if capacity is not None and view.free_executors > 0:
            scanned = self._decide_drf(view, active, capacity) if active else WAIT
            assert answer == scanned, f"at {view.now}"
            answers.append(answer)
        return answer

    monkeypatch.setattr(FairScheduler, "decide", both)
    return answers


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("nodes", [0, 4])
def test_the_index_answers_as_the_pass_over_every_job(both_ways, scale, nodes):
    """Shares narrowed and widened, on a pool with and without nodes, with requests of
    several sizes (stages that do not fit are passed over): each answer is the pass's."""
    workload = batch_on_nodes(11, 60, nodes)
    simulate(workload, make_scheduler(f"fair?scale={scale}"), seed=11)
    assert WAIT in both_ways and any(isinstance(a, Decision) for a in both_ways)


def test_a_job_with_free_executors_of_its_own_goes_first():
    """The first job below its share has no executor of its own; a later one, whose first
    stage just ended, has: it is chosen (no move), as the pass chooses it."""
    cluster = Cluster(4, resources=ResourceVector.parse("cpu=4"))
    first = cluster.add_job(one_stage("1"), 0.0)
    chain = [
        {"name": n, "tasks": 1, "taskDurationSeconds": 10, "resources": {"cpu": "1"}}
        for n in ("a", "b")
    ]
    chain[1]["dependsOn"] = ["a"]
    mine = cluster.add_job(Dag.from_spec(parse_workflow({"stages": chain})), 0.0)
    cluster.apply(Decision(mine.stages[0], 1), 0.0)
    assert cluster.task_finished(0, 1.0) is None  # a is done: b waits, its executor free
    assert cluster.free_executors_from(mine) == 1 and not cluster.free_executors_from(first)
    fair = make_scheduler("fair")
    answer = fair.decide(cluster)
    assert isinstance(answer, Decision) and answer.stage is mine.stages[1]
    active = [j for j in cluster.jobs if j.unlaunched > 0]
    assert fair._decide_drf(cluster, active, (4000,)) == answer


def test_a_question_reads_only_the_jobs_that_changed(monkeypatch):
    """With 2,000 workflows waiting behind 1,000 running, the first question reads each
    once; after one task ends, the next reads the jobs that task changed, not 3,000."""
    cluster = Cluster(10_000, resources=ResourceVector.parse("cpu=4000"))
    for _ in range(1000):
        running = cluster.add_job(one_stage("4", tasks=2), 0.0)
        cluster.apply(Decision(running.stages[0], 1), 0.0)  # the pool's CPUs taken
    for _ in range(2000):
        cluster.add_job(one_stage("4"), 0.0)
    read: list[int] = []
    share = shares_module.dominant_share
    monkeypatch.setattr(shares_module, "dominant_share", lambda *a: read.append(1) or share(*a))
    fair = make_scheduler("fair")
    assert fair.decide(cluster) is WAIT  # (the pool is full: no stage fits)
    assert len(read) == 3000
    read.clear()
    cluster.task_finished(0, 10.0)  # the first job goes on with its second task
    cluster.task_finished(1, 10.0)
    cluster.task_finished(1, 11.0)  # ... and the second is done: 4 CPUs free
    answer = fair.decide(cluster)
    assert isinstance(answer, Decision) and answer.stage.job is cluster.jobs[999]
    assert len(read) <= 2


def test_the_trees_find_the_first_job_below_a_level_after_another():
    """Known answers on a hand-built pool of four jobs holding 0, 2, 1 and 0 of 4 CPUs."""
    cluster = Cluster(8, resources=ResourceVector.parse("cpu=4"))
    jobs = [cluster.add_job(one_stage("1", tasks=3), 0.0) for _ in range(4)]
    cluster.apply(Decision(jobs[1].stages[0], 2), 0.0)
    cluster.apply(Decision(jobs[2].stages[0], 1), 0.0)
    index, capacity = Shares(cluster.jobs), (4000,)
    assert index.active(cluster, capacity) == 4
    assert [dominant_share(j.held, j.holding, 8, capacity) for j in jobs] == [0, 0.5, 0.25, 0]
    assert index.first_below(cluster, capacity, 0.3, after=jobs[0]) is jobs[2]
    assert index.first_below(cluster, capacity, 0.2, after=jobs[0]) is jobs[3]
    assert index.first_below(cluster, capacity, 0.0) is None
    assert index.first_below(cluster, capacity, inf, after=jobs[3]) is None
    assert index.first_below(cluster, capacity, 1.0, own=True) is None  # (none has its own)


def test_the_index_answers_as_the_pass_behind_queues(both_ways):
    """Behind the pool's queues (`sim.admission`), which show fair only the stages they
    let start: each answer is the pass's."""
    workload = build_workload("teams", 4, num_jobs=10)
    workload = replace(workload, resources=ResourceVector.parse("cpu=24"))
    simulate(workload, make_scheduler("fair"), seed=4)
    assert any(isinstance(a, Decision) for a in both_ways)


# -- the floors: jobs none of whose stages fit are skipped --------------------------------


def stages(*asks: dict[str, object]) -> Dag:
    """Independent one-task stages, each with the given fields (``resources`` among them)."""
    specs = [
        {"name": f"s{i}", "tasks": 1, "taskDurationSeconds": 10, **ask}
        for i, ask in enumerate(asks)
    ]
    return Dag.from_spec(parse_workflow({"stages": specs}))


def test_known_answers_for_a_jobs_floors():
    """The least each runnable stage asks, per resource; a resource asked of none is -1,
    a stage that asks nothing (or a gang) lets every bound pass, no stage is inf."""
    cluster = Cluster(8, resources=ResourceVector.parse("cpu=8,memory=8Gi"))
    mixed = cluster.add_job(
        stages({"resources": {"cpu": "2", "memory": "1Gi"}}, {"resources": {"cpu": "3"}}), 0.0
    )
    assert floors(mixed, 2) == (2000, -1)
    bare = cluster.add_job(stages({"resources": {"cpu": "2"}}, {}), 0.0)
    assert floors(bare, 2) == (NONE_FITS, NONE_FITS)
    gang = cluster.add_job(stages({"resources": {"cpu": "1"}, "tasks": 2, "gang": True}), 0.0)
    assert floors(gang, 2) == (NONE_FITS, NONE_FITS)
    cluster.apply(Decision(mixed.stages[0], 1), 0.0)
    cluster.apply(Decision(mixed.stages[1], 2), 0.0)
    assert not mixed.runnable and floors(mixed, 2) == (inf, inf)


def test_known_answers_for_the_pools_fit_bound():
    """Pods only: none; a pool's totals: its free amounts; nodes: the most free on a node
    with a pod free; no room anywhere: every resource NONE_FITS."""
    assert Cluster(4).fit_bound() is None
    totals = Cluster(4, resources=ResourceVector.parse("cpu=4,memory=4Gi"))
    assert totals.fit_bound() == (4000, 4 * 1024**3 * 1000)
    totals.add_job(stages({"resources": {"cpu": "3"}}), 0.0)
    totals.apply(Decision(totals.jobs[0].stages[0], 1), 0.0)
    assert totals.fit_bound() == (1000, 4 * 1024**3 * 1000)
    two = identical_nodes(ResourceVector.parse("cpu=8,memory=32Gi"), 2, 2)  # a pod each
    nodes = Cluster(2, resources=nodes_total(two), nodes=two)
    assert nodes.fit_bound()[0] == 8000
    for _ in range(2):  # once both run, no node has a pod free
        job = nodes.add_job(stages({"resources": {"cpu": "1"}}), 0.0)
        nodes.apply(Decision(job.stages[0], 1), 0.0)
    assert nodes.fit_bound() == (NONE_FITS, NONE_FITS)


def test_a_full_pool_skips_the_jobs_none_of_whose_stages_fit(monkeypatch):
    """1,000 jobs wait, each asking 4 CPUs of a pool with 2 free, behind one asking 1
    CPU: the question tests the stages of the one that fits, not the 1,000 ahead of it
    (without the bound it tests every one of them: the same answer)."""
    cluster = Cluster(10_000, resources=ResourceVector.parse("cpu=10"))
    running = cluster.add_job(stages({"resources": {"cpu": "8"}}), 0.0)
    cluster.apply(Decision(running.stages[0], 1), 0.0)
    for _ in range(1000):
        cluster.add_job(stages({"resources": {"cpu": "4"}}), 0.0)
    small = cluster.add_job(stages({"resources": {"cpu": "1"}}), 0.0)
    tested: list[object] = []
    launchable = heuristics.launchable
    monkeypatch.setattr(heuristics, "launchable", lambda s, f: tested.append(s) or launchable(s, f))
    answer = make_scheduler("fair").decide(cluster)
    assert isinstance(answer, Decision) and answer.stage.job is small
    assert len(tested) == 1
    tested.clear()
    monkeypatch.setattr(Cluster, "fit_bound", lambda self: None)
    assert make_scheduler("fair").decide(cluster) == answer
    assert len(tested) == 1001


def test_a_descent_that_ends_in_a_subtree_goes_on_after_it():
    """Two jobs side by side under one node of the trees, one below the level but asking
    too much, the other asking little but at its share: the node passes on its minima,
    neither child does; the third job, after them, is the answer."""
    cluster = Cluster(8, resources=ResourceVector.parse("cpu=4,memory=4Gi"))
    big = cluster.add_job(stages({"resources": {"cpu": "3"}}, {"resources": {"cpu": "3"}}), 0.0)
    full = cluster.add_job(stages({"resources": {"cpu": "1"}}, {"resources": {"cpu": "1"}}), 0.0)
    third = cluster.add_job(stages({"resources": {"cpu": "1"}}), 0.0)
    cluster.apply(Decision(full.stages[0], 1), 0.0)  # (a share of 1/4, not below 0.2)
    index, capacity = Shares(cluster.jobs), (4000, 4 * 1024**3 * 1000)
    bound = (2000, 4 * 1024**3 * 1000)
    assert index.first_below(cluster, capacity, 0.2) is big
    assert index.first_below(cluster, capacity, 0.2, bound=bound) is third
    assert index.first_below(cluster, capacity, 0.2, bound=(NONE_FITS, NONE_FITS)) is None


def test_the_index_answers_as_the_pass_on_a_told_pools_replay(both_ways):
    """A replay of a pool whose nodes are told as the operator's driver tells them
    (`benchmarks/forecast.py`'s ``told``): each of fair's answers is the pass's."""
    cluster, replayed = waiting_pool(40, "fair", "told")
    forecast(cluster, make_scheduler(replayed), seed=0, replays=1)
    assert WAIT in both_ways and any(isinstance(a, Decision) for a in both_ways)
