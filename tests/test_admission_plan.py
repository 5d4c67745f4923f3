"""The admission answers a question with a plan and changes nothing of the pool: the cluster
asks the policy with the plan's views and applies the answer (idlegate.sim.admission's
cycle, steps 8 and 9). What a policy is shown is a view, never a job changed to hide a
stage; the admission calls nothing of the cluster back."""

from __future__ import annotations

from typing import Any

import pytest

from idlegate.errors import IllegalDecisionError
from idlegate.sim.admission import Admission
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import WAIT, Action, Decision, Job
from idlegate.sim.queues import QueueSpec


def dag(tasks: int = 1, seconds: float = 10.0) -> Dag:
    return Dag(("s",), (tasks,), (seconds,), ((),), ((),), (False,))


def pool(executors: int, *queues: QueueSpec) -> Cluster:
    cluster = Cluster(executors)
    cluster.admission = Admission(queues, cluster.capacity, cluster.resource_names)
    return cluster


def add(cluster: Cluster, queue: int = 0, priority: int = 0, tasks: int = 1) -> Job:
    job = cluster.add_job(dag(tasks), cluster.now)
    job.queue, job.priority = queue, priority
    cluster.touch(job)
    return job


class Asked:
    """A policy that answers WAIT and records what it saw at each question."""

    name = "asked"
    needs_cluster = False

    def __init__(self, look: Any) -> None:
        self.look = look
        self.seen: list[Any] = []

    def reset(self, rng: object) -> None:
        pass

    def decide(self, view: Any) -> Action:
        self.seen.append(self.look(view))
        return WAIT


def test_a_stage_held_back_is_hidden_by_the_view_not_taken_out_of_its_job():
    cluster = pool(4, QueueSpec("a", {"pods": 2000}), QueueSpec("b", {"pods": 2000}))
    low, high = add(cluster), add(cluster, priority=5)
    stages, stage = low.runnable, low.stages[0]
    cluster.changed = {}

    def look(view: Any) -> tuple[Any, ...]:
        return (low.runnable is stages, list(low.runnable), view.runnable(low))

    asked = Asked(look)
    assert cluster.decide_once(asked, 0.0) == (WAIT, [])
    # (asked of queue a's view: the priority phase holds `low` back there, and only there)
    assert asked.seen == [(True, [stage], [])]
    assert cluster.runnable(low) == [stage] and high.runnable == [high.stages[0]]
    assert low not in cluster.changed  # (nothing was done to it: nothing to read again)


def test_a_queues_view_shows_no_stage_of_another_queues_workflow():
    cluster = pool(4, QueueSpec("a", {"pods": 2000}), QueueSpec("b", {"pods": 2000}))
    a, b = add(cluster, queue=0), add(cluster, queue=1)
    admission = cluster.admission
    assert admission is not None and admission.open(cluster)
    views = {view.queue: view for view in admission.views(cluster)}
    assert views[0].runnable(a) == a.runnable and views[0].runnable(b) == []
    assert views[1].runnable(b) == b.runnable and views[1].runnable(a) == []


def test_a_decision_on_a_stage_the_plan_holds_back_is_refused_and_changes_nothing():
    cluster = pool(4, QueueSpec("a", {"pods": 2000}))
    low = add(cluster)
    add(cluster, priority=5)

    class Low(Asked):
        def decide(self, view: Any) -> Action:
            return Decision(low.stages[0], 4)

    with pytest.raises(IllegalDecisionError, match="priority 5 go first"):
        cluster.decide_once(Low(None), 0.0)
    assert low.held == 0 and cluster.decisions == 0


def test_a_planner_forks_the_pool_as_it_is_and_the_fork_runs_the_stage_it_was_not_shown():
    # `low` started one of its two tasks before `high` came: its second task is held back
    # by priority. A planner is shown the pool without it, and forks the pool as it is:
    # in the fork the running task ends and its executor goes on with the second.
    cluster = pool(2, QueueSpec("a", {}))
    low = add(cluster, tasks=2)
    cluster.apply(Decision(low.stages[0], 1), 0.0)
    add(cluster, priority=5)
    forks: list[Cluster] = []

    class Planner(Asked):
        needs_cluster = True

        def decide(self, view: Any) -> Action:
            assert view.runnable(low) == []
            forks.append(view.fork())
            return WAIT

    cluster.decide_once(Planner(None), 1.0)
    (fork,) = forks
    twin = next(j for j in fork.jobs if j.id == low.id)
    assert twin.runnable == [twin.stages[0]]
    (running,) = fork.running_tasks()
    assert fork.task_finished(running[0], 10.0) is twin.stages[0]  # (it goes on)
    assert twin.stages[0].launched == 2 and twin.runnable == []


class ReadOnly:
    """A pool the admission may read and not change: what it reads passes through, and
    anything that would change the pool fails the test."""

    CHANGES = frozenset({"apply", "answer", "touch", "idle_expired", "add_job", "advance"})

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def __getattr__(self, name: str) -> Any:
        if name in self.CHANGES:
            raise AssertionError(f"the admission called the pool's {name}")
        return getattr(self._cluster, name)


def test_the_admission_reads_the_pool_and_calls_nothing_of_it_back():
    cluster = pool(2, QueueSpec("a", {"pods": 2000}, wait_bound=5.0))
    admission = cluster.admission
    assert admission is not None
    job, other = add(cluster), add(cluster)
    assert cluster.can_schedule()  # (their stages begin to wait at 0)
    cluster.apply(Decision(job.stages[0], 1, idle_delay=100.0), 0.0)
    cluster.advance(10.0)
    stage = job.stages[0]
    seen = ReadOnly(cluster)
    # past the bound, the deliberate wait ends: the admission names it, the cluster ends it
    assert admission.idle_over(seen) == [stage]
    assert stage.idle_until == 100.0 and stage not in job.runnable
    admission.open(seen)
    list(admission.views(seen))
    admission.result(seen)
    assert cluster.can_schedule() and stage.idle_until is None and stage in job.runnable
    assert other.runnable  # (untouched by the questions asked of the read-only pool)


def test_the_plan_of_a_question_stands_after_its_answer_is_applied():
    cluster = pool(4, QueueSpec("a", {"pods": 2000}), QueueSpec("b", {"pods": 2000}))
    a = add(cluster, tasks=3)
    admission = cluster.admission
    assert admission is not None and cluster.can_schedule()
    plan = admission.plan
    assert plan.served == (0,) and plan.stop == ()
    (rooms,) = plan.rooms.values()
    assert cluster.decide_once(Asked(id), 0.0) == (WAIT, [])  # (nothing applied)
    step = cluster.decide_once(First(), 0.0)
    assert step is not None and len(step[1]) == 2  # (cut to the queue's 2 pods)
    assert a.held == 2 and admission.plan is plan  # (until the next question opens)
    cluster.can_schedule()
    assert admission.plan is not plan
    assert plan.served == (0,) and list(plan.rooms.values()) == [rooms]
    assert list(rooms.values()) == [2]


class First:
    """The first stage a view shows, with a cap of the whole pool."""

    name = "first"

    def reset(self, rng: object) -> None:
        pass

    def decide(self, view: Any) -> Action:
        stages = view.runnable_stages()
        return Decision(stages[0], view.num_executors * 2) if stages else WAIT


def test_a_pool_that_answered_a_question_forks_and_pickles():
    # the operator's replay process takes a fork of the pool pickled (a refresh, a round):
    # the plan a pool keeps must pickle, its empty mappings too
    import pickle

    from idlegate.sim.rollout import planning_fork

    cluster = pool(4, QueueSpec("a", {"pods": 2000}), QueueSpec("b", {"pods": 1}))
    add(cluster, tasks=3)
    add(cluster, queue=1, tasks=2)
    assert cluster.decide_once(First(), 0.0) is not None
    cluster.can_schedule()  # (a question opens: its plan is kept on the pool)
    fork = pickle.loads(pickle.dumps(planning_fork(cluster)))
    assert [j.id for j in fork.jobs] == [j.id for j in cluster.jobs]
    plan = pickle.loads(pickle.dumps(cluster.admission.plan))  # type: ignore[union-attr]
    assert plan.served == cluster.admission.plan.served  # type: ignore[union-attr]
