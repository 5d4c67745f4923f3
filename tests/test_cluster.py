"""Illegal decisions raise clear errors; the state machine's bookkeeping at a glance."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError, IllegalDecisionError
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import WAIT, Decision
from idlegate.sim.rollout import planning_fork
from idlegate.sim.spec import parse_workflow
from tests.helpers import Waits, chain


def diamond(gang_d: bool = False) -> Dag:
    return Dag.from_spec(
        parse_workflow(
            {
                "stages": [
                    {"name": "a", "tasks": 2, "taskDurationSeconds": 1},
                    {"name": "b", "tasks": 3, "taskDurationSeconds": 2, "dependsOn": ["a"]},
                    {"name": "c", "tasks": 1, "taskDurationSeconds": 5, "dependsOn": ["a"]},
                    {
                        "name": "d",
                        "tasks": 2,
                        "taskDurationSeconds": 1,
                        "dependsOn": ["b", "c"],
                        "gang": gang_d,
                    },
                ]
            }
        )
    )


def test_runnable_follows_dependencies():
    c = Cluster(4)
    job = c.add_job(diamond(), 0.0)
    assert [s.name for s in c.runnable_stages()] == ["a"]
    launches = c.apply(Decision(job.stages[0], 4), 0.0)
    assert [(x.executor, x.first, x.moved) for x in launches] == [(0, True, True), (1, True, True)]
    assert c.runnable_stages() == [] and c.free_executors == 2 and job.held == 2
    assert c.task_finished(0, 1.0) is None
    assert c.runnable_stages() == []  # a is not complete yet
    assert c.task_finished(1, 1.0) is None
    assert [s.name for s in c.runnable_stages()] == ["b", "c"]
    assert job.remaining_work == pytest.approx(3 * 2 + 5 + 2)


def test_executor_keeps_working_on_its_stage():
    c = Cluster(1)
    job = c.add_job(chain(1.0, tasks=3), 0.0)
    (first,) = c.apply(Decision(job.stages[0], 1), 0.0)
    assert c.task_finished(first.executor, 1.0) is job.stages[0]
    assert c.task_finished(0, 2.0) is not None
    assert c.task_finished(0, 3.0) is None
    assert job.finish == 3.0 and c.done[0].jct == 3.0


def test_moving_is_reported_only_when_an_executor_changes_job():
    c = Cluster(1)
    a = c.add_job(chain(1.0, 1.0), 0.0)
    c.add_job(chain(1.0), 0.0)
    (l1,) = c.apply(Decision(a.stages[0], 1), 0.0)
    assert l1.moved
    c.task_finished(0, 1.0)
    (l2,) = c.apply(Decision(a.stages[1], 1), 1.0)
    assert not l2.moved and l2.first
    c.task_finished(0, 2.0)
    _, (l3,) = c.decide_once(_First(), 2.0)
    assert l3.moved


class _First:
    name = "first"

    def reset(self, rng):
        pass

    def decide(self, view):
        return Decision(view.runnable_stages()[0], view.num_executors)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda c, j: Decision(j.stages[1], 2), "not runnable"),
        (lambda c, j: Decision(j.stages[0], 0), "no room for another executor"),
        (lambda c, j: Decision(j.stages[0], 2, -1.0), "idle delay must be a finite number"),
        (lambda c, j: Decision(j.stages[0], 2, float("nan")), "idle delay must be a finite number"),
        (lambda c, j: Decision(j.stages[0], 2.5), "must be an int"),
    ],
)
def test_illegal_decisions(make, message):
    c = Cluster(2)
    j = c.add_job(diamond(), 0.0)
    with pytest.raises(IllegalDecisionError, match=message):
        c.apply(make(c, j), 0.0)


def test_cap_below_held_and_second_delay_are_illegal():
    c = Cluster(4)
    j = c.add_job(diamond(), 0.0)
    c.apply(Decision(j.stages[0], 2), 0.0)
    c.task_finished(0, 1.0)
    c.task_finished(1, 1.0)
    b, cc = j.stages[1], j.stages[2]
    c.apply(Decision(b, 2), 1.0)
    with pytest.raises(IllegalDecisionError, match="below the 2 executors it holds"):
        c.apply(Decision(cc, 1), 1.0)
    c.apply(Decision(cc, 2, 3.0), 1.0)
    with pytest.raises(IllegalDecisionError, match="inside an idle slot"):
        c.apply(Decision(cc, 3), 1.0)
    c.idle_expired(cc, 4.0)
    with pytest.raises(IllegalDecisionError, match="already delayed once"):
        c.apply(Decision(cc, 3, 1.0), 4.0)
    with pytest.raises(IllegalDecisionError, match="already started"):
        c.apply(Decision(b, 3, 1.0), 4.0)


def test_gang_stage_needs_room_for_all_tasks():
    c = Cluster(2)
    j = c.add_job(
        Dag.from_spec(
            parse_workflow(
                {"stages": [{"name": "g", "tasks": 2, "taskDurationSeconds": 1, "gang": True}]}
            )
        ),
        0.0,
    )
    with pytest.raises(IllegalDecisionError, match="needs 2 executors at once"):
        c.apply(Decision(j.stages[0], 1), 0.0)
    assert len(c.apply(Decision(j.stages[0], 2), 0.0)) == 2
    with pytest.raises(IdlegateError, match="gang of 2 tasks, but the cluster has only 1"):
        Cluster(1).add_job(j.dag, 0.0)
    c3 = Cluster(3)
    c3.add_job(chain(5.0, tasks=2), 0.0)
    c3.add_job(j.dag, 0.0)
    c3.apply(Decision(c3.jobs[0].stages[0], 1), 0.0)
    assert c3.runnable_stages() == [c3.jobs[0].stages[0], c3.jobs[1].stages[0]]
    c3.apply(Decision(c3.jobs[1].stages[0], 2), 0.0)
    with pytest.raises(IllegalDecisionError, match="no executor is free"):
        c3.apply(Decision(c3.jobs[0].stages[0], 3), 0.0)


def test_a_wait_launches_nothing_and_garbage_is_rejected():
    c = Cluster(1)
    c.add_job(chain(1.0), 0.0)
    assert c.decide_once(Waits(), 0.0) == (WAIT, []) and c.free_executors == 1

    class Garbage(Waits):
        def decide(self, view):
            return "stage 0 please"

    with pytest.raises(IllegalDecisionError, match="must return a Decision or WAIT"):
        c.decide_once(Garbage(), 0.0)


def test_decide_once_asks_once_and_a_rejected_answer_loses_nothing():
    c = Cluster(3)
    a = c.add_job(chain(1.0, tasks=2), 0.0)
    b = c.add_job(diamond(), 0.0)
    action, launches = c.decide_once(_First(), 0.0)
    assert action.stage is a.stages[0] and len(launches) == 2 and c.decisions == 1
    bad = Decision(b.stages[1], 3)  # not runnable: its parent has not run
    with pytest.raises(IllegalDecisionError, match="not runnable"):
        c.decide_once(_Answer(bad), 0.0)
    assert c.free_executors == 1 and a.held == 2 and c.decisions == 1  # a's launches stay
    assert c.decide_once(_Answer(WAIT), 0.0) == (WAIT, [])
    c.decide_once(_Answer(Decision(b.stages[0], 1)), 0.0)
    assert c.decide_once(_First(), 0.0) is None  # no executor free: nothing to ask


class _Answer(_First):
    def __init__(self, action):
        self.action = action

    def decide(self, view):
        return self.action


def test_time_cannot_go_backwards_and_cluster_needs_executors():
    c = Cluster(1)
    c.add_job(chain(1.0), 5.0)
    with pytest.raises(IllegalDecisionError, match="time went backwards"):
        c.add_job(chain(1.0), 4.0)
    with pytest.raises(IllegalDecisionError, match="at least 1 executor"):
        Cluster(0)


def test_restore_progress_after_a_restart():
    c = Cluster(3)
    c.advance(5.0)
    job = c.add_job(diamond(), 5.0, "wf", arrival=1.0)
    claimed = c.restore_progress(
        job, finished=[2, 0, 0, 0], running=[(1, 2)], idle_until={2: 9.0}, cap=2, first_start=1.5
    )
    assert claimed == [2]
    a, b, cc, _ = job.stages
    assert job.arrival == 1.0 and job.first_start == 1.5 and job.cap == 2 and job.held == 1
    assert a.complete and b.launched == 1 and b.executors == 1 and cc.delayed
    assert c.runnable_stages() == [b] and c.free_executors == 2
    assert c.new_timers == [cc] and cc.idle_until == 9.0
    assert job.remaining_work == pytest.approx(6 + 5 + 2) and job.unlaunched == 2 + 1 + 2
    assert c.task_finished(2, 6.0) is b  # the restored executor keeps working on b
    c.idle_expired(cc, 9.0)
    assert cc in c.runnable_stages()
    with pytest.raises(IllegalDecisionError, match="restore it only once"):
        c.restore_progress(job, finished=[2, 0, 0, 0])


def test_restore_of_a_job_that_finished_while_down_completes_it():
    c = Cluster(1)
    c.advance(50.0)
    job = c.add_job(chain(1.0, 1.0), 50.0, "done", arrival=10.0)
    c.restore_progress(job, finished=[1, 1], first_start=10.0)
    assert c.jobs == [] and c.done[0].jct == 40.0


def test_restore_rejects_more_running_tasks_than_the_pool():
    c = Cluster(1)
    job = c.add_job(chain(1.0, tasks=3), 0.0)
    with pytest.raises(IdlegateError, match="raise the pool size"):
        c.restore_progress(job, finished=[0], running=[(0, 0), (0, None)])


def test_remove_job_frees_its_executors():
    c = Cluster(4)
    job = c.add_job(chain(1.0, tasks=3), 0.0)
    other = c.add_job(chain(1.0), 0.0)
    c.apply(Decision(job.stages[0], 3), 0.0)
    assert c.free_executors == 1
    assert sorted(c.remove_job(job, 0.5)) == [0, 1, 2]
    assert c.free_executors == 4 and c.jobs == [other] and c.removed == [job] and not c.done
    assert c.remove_job(job, 0.6) == []


# -- tasks beyond the pool ------------------------------------------------------------------


def test_a_task_started_unasked_takes_a_free_executor_and_ends_its_idle_slot():
    c = Cluster(2)
    job = c.add_job(chain(1.0, tasks=3), 0.0)
    stage = job.stages[0]
    c.apply(Decision(stage, 2, idle_delay=5.0), 0.0)
    assert stage.idle_until == 5.0
    ((launch, token),) = c.started_unasked(stage, 1.0, "pod-0")
    assert token == "pod-0" and launch.stage is stage and stage.idle_until is None
    assert c.beyond == [] and c.busy == 1 and job.held == 1 and stage.launched == 1


def test_with_no_executor_free_a_task_runs_beyond_the_pool_and_nothing_new_starts():
    c = Cluster(1)
    a = c.add_job(chain(1.0, tasks=2), 0.0)
    b = c.add_job(chain(1.0, tasks=2), 0.0)
    (launch,) = c.apply(Decision(a.stages[0], 1), 0.0)
    assert c.started_unasked(b.stages[0], 0.5, "b-0") == []
    assert c.beyond == [(b.stages[0], "b-0")] and c.busy == 2 and b.stages[0].launched == 0
    # a's executor does not go on with a's second task: it is owed to b's task
    assert c.task_finished(launch.executor, 1.0) is None
    assert not c.can_schedule()
    ((adopted, token),) = c.adopt_beyond(1.0)
    assert token == "b-0" and adopted.executor == launch.executor
    assert c.beyond == [] and b.held == 1 and c.busy == 1
    assert c.task_finished(adopted.executor, 2.0) is b.stages[0]  # nothing beyond: it goes on


def test_the_oldest_task_beyond_the_pool_gets_the_freed_executor_first():
    c = Cluster(1)
    a = c.add_job(chain(1.0, tasks=1), 0.0)
    b = c.add_job(chain(1.0, tasks=1), 0.0)
    d = c.add_job(chain(1.0, tasks=1), 0.0)
    (launch,) = c.apply(Decision(a.stages[0], 1), 0.0)
    c.run_beyond(d.stages[0], "d-0")
    c.run_beyond(b.stages[0], "b-0")
    c.task_finished(launch.executor, 1.0)
    assert [token for _, token in c.adopt_beyond(1.0)] == ["d-0"]
    assert c.beyond == [(b.stages[0], "b-0")] and c.busy == 2


def test_a_gang_beyond_the_pool_is_adopted_whole_with_its_new_tasks_to_start():
    c = Cluster(3)
    job = c.add_job(diamond(gang_d=True), 0.0)
    d = job.stages[3]
    c.restore_progress(job, finished=[2, 3, 1, 0])
    c.run_beyond(d, "d-0")
    adopted = c.adopt_beyond(0.0)
    assert [token for _, token in adopted] == ["d-0", None]  # the gang's second task: new
    assert d.launched == 2 and job.held == 2 and c.beyond == []


def test_a_job_that_leaves_forgets_its_tasks_beyond_the_pool():
    c = Cluster(1)
    a = c.add_job(chain(1.0, tasks=1), 0.0)
    c.apply(Decision(a.stages[0], 1), 0.0)
    b = c.add_job(chain(1.0, tasks=1), 0.0)
    c.run_beyond(b.stages[0], "b-0")
    c.remove_job(b, 1.0)
    assert c.beyond == [] and c.busy == 1


def test_a_stage_launches_only_its_available_tasks():
    c = Cluster(3)
    job = c.add_job(chain(1.0, tasks=3), 0.0)
    stage = job.stages[0]
    c.tasks_available(stage, 1, 0.0)
    (only,) = c.apply(Decision(stage, 3), 0.0)  # room for 3, one available
    assert c.runnable_stages() == [] and c.free_executors == 2
    c.needs_schedule = False
    c.tasks_available(stage, 2, 0.5)
    assert c.runnable_stages() == [stage] and c.needs_schedule  # a decision round is due
    assert len(c.apply(Decision(stage, 3), 0.5)) == 1
    assert c.task_finished(only.executor, 1.0) is None  # no third task to go on with
    fork = c.fork()
    assert fork.runnable_stages() == [] and fork.jobs[0].stages[0].available == 2
    planned = planning_fork(c)  # a simulated future: nothing would make more available
    assert [s.name for s in planned.runnable_stages()] == ["s0"]
    with pytest.raises(IllegalDecisionError):
        c.tasks_available(stage, 1, 1.0)  # below what was launched
    c.tasks_available(stage, 3, 1.0)
    assert len(c.apply(Decision(stage, 3), 1.0)) == 1
    for executor, _, _ in c.running_tasks():
        assert c.task_finished(executor, 2.0) is None
    assert job.finish == 2.0


def test_a_child_with_no_available_task_is_not_runnable_when_its_parents_complete():
    c = Cluster(2)
    job = c.add_job(diamond(), 0.0)
    for stage in job.stages[1:3]:
        c.tasks_available(stage, 0, 0.0)
    c.apply(Decision(job.stages[0], 2), 0.0)
    c.task_finished(0, 1.0)
    c.task_finished(1, 1.0)
    assert c.runnable_stages() == [] and c.free_executors == 2
    c.tasks_available(job.stages[2], 1, 2.0)
    assert [s.name for s in c.runnable_stages()] == ["c"]


def test_a_failed_task_frees_its_executor_and_is_launched_again():
    c = Cluster(2)
    job = c.add_job(chain(1.0, tasks=2), 0.0)
    stage = job.stages[0]
    c.tasks_available(stage, 1, 0.0)
    (launch,) = c.apply(Decision(stage, 2), 0.0)
    c.needs_schedule = False
    c.task_failed(launch.executor, 1.0)
    assert (stage.launched, stage.finished, job.held, job.unlaunched) == (0, 0, 0, 2)
    assert c.free_executors == 2 and c.needs_schedule
    assert c.runnable_stages() == [stage]  # its task is available again
    assert len(c.apply(Decision(stage, 2), 1.0)) == 1


def test_no_executor_keeps_a_job_that_left():
    """An executor remembers its last job (a task of another moves); once the job has
    finished or been removed nothing refers to it (it is freed, and forks map it to none)."""
    from idlegate.policy import make_scheduler
    from idlegate.sim.engine import Engine
    from idlegate.sim.workloads import build_workload

    workload = build_workload("synthetic", 3, num_jobs=20)
    engine = Engine.for_workload(workload, make_scheduler("fair"), 3)
    engine.run(200.0)
    cluster = engine.cluster
    cluster.remove_job(cluster.jobs[0], cluster.now)
    assert cluster.removed and cluster.done
    assert all(j is None or j.finish is None for j in cluster._exec_job)
