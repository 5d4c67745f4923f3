"""Stopping a running task in the simulator (`Cluster.stop`, `Engine.stop`; issue 82):
event traces of hand-built cases of two and three tasks, on the engine's virtual clock."""

from __future__ import annotations

import pytest

from idlegate.errors import IllegalDecisionError
from idlegate.sim.cluster import Cluster
from idlegate.sim.metrics import run_metrics
from idlegate.sim.protocol import Decision
from tests.helpers import chain, dag, spec_dag
from tests.reclaim_helpers import engine_of, events


def test_a_stopped_task_runs_again_from_the_start_and_its_workflow_finishes() -> None:
    # one executor, one task of 10 s; stopped at 4 s, it is ready again at once and the
    # round its freed executor makes starts it over: it ends at 14 s
    engine = engine_of((0, "A", chain(10.0)))
    engine.run(4.0)
    engine.stop([0])
    engine.run()
    assert events(engine, "launch", "preempted", "job-done") == [
        (0.0, "launch", 0, 0, (1, 1)),
        (4.0, "preempted", 0, 0, (0, 4.0)),
        (4.0, "launch", 0, 0, (1, 1)),
        (14.0, "job-done", 0, -1, 14.0),
    ]
    result = engine.result("test", "fifo", 0)
    assert [(r.start, r.end) for r in result.tasks or []] == [(0.0, 4.0), (4.0, 14.0)]
    assert (result.preempted, result.preempted_seconds) == (1, 4.0)
    assert result.busy_seconds == 14.0  # (the 4 s lost were run: busy, and lost)
    metrics = run_metrics(result)
    assert (metrics.preempted, metrics.lost_seconds) == (1, 4.0)
    assert metrics.lost_share == pytest.approx(4.0 / 14.0)
    assert metrics.to_dict()["preempted"] == 1


def test_the_freed_executor_goes_to_the_policys_pick_and_the_stopped_task_follows() -> None:
    # three tasks on one executor: A's (10 s) runs, B's (5 s) arrives at 2 s and waits;
    # A's stopped at 3 s: srpt starts B's (less work left), then A's again, from the start
    engine = engine_of((0, "A", chain(10.0)), (2, "B", chain(5.0)), policy="srpt")
    engine.run(3.0)
    engine.stop([0])
    engine.run()
    assert events(engine, "launch", "preempted", "job-done") == [
        (0.0, "launch", 0, 0, (1, 1)),
        (3.0, "preempted", 0, 0, (0, 3.0)),
        (3.0, "launch", 1, 0, (1, 1)),
        (8.0, "job-done", 1, -1, 6.0),
        (8.0, "launch", 0, 0, (1, 1)),
        (18.0, "job-done", 0, -1, 18.0),
    ]
    assert len(engine.cluster.done) == 2 and not engine.cluster.jobs


def test_a_checkpointed_stage_loses_nothing_and_resumes_with_what_it_had_left() -> None:
    stages = ({"name": "a", "tasks": 1, "taskDurationSeconds": 10, "checkpointed": True},)
    engine = engine_of((0, "A", spec_dag(*stages)), (2, "B", chain(5.0)), policy="srpt")
    engine.run(4.0)
    engine.stop([0])
    engine.run()
    # stopped at 4 s with 6 s left, after B's 5 s it runs those 6 s: 9 s to 15 s
    assert events(engine, "launch", "preempted", "job-done") == [
        (0.0, "launch", 0, 0, (1, 1)),
        (4.0, "preempted", 0, 0, (0, 0.0)),
        (4.0, "launch", 1, 0, (1, 1)),
        (9.0, "job-done", 1, -1, 7.0),
        (9.0, "launch", 0, 0, (1, 1)),
        (15.0, "job-done", 0, -1, 15.0),
    ]
    result = engine.result("test", "srpt", 0)
    assert (result.preempted, result.preempted_seconds) == (1, 0.0)
    assert result.busy_seconds == 15.0  # (nothing run twice)


def test_a_stop_counts_no_failure_and_changes_no_finished_work() -> None:
    # two tasks of one stage on two executors, the second stopped at 6 s: the stage's
    # finished count and the job's remaining work are as before; the task is ready again
    cluster = Cluster(2)
    job = cluster.add_job(dag(("a", 2, 10.0, [])), 0.0)
    (stage,) = job.stages
    cluster.apply(Decision(stage, 2), 0.0)
    cluster.task_finished(0, 5.0)
    before = (stage.finished, job.remaining_work)
    (stopped,) = cluster.stop([1], 6.0)
    assert (stopped.executor, stopped.stage, stopped.start, stopped.lost) == (1, stage, 0.0, 6.0)
    assert (stage.finished, job.remaining_work) == before
    assert (stage.launched, stage.running, job.held, cluster.free_executors) == (1, 0, 0, 2)
    assert job.runnable == [stage] and cluster.needs_schedule
    assert cluster.stopped == (stopped,) and cluster.preempted == 1


def test_a_task_that_ended_cannot_be_stopped_and_a_refused_stop_changes_nothing() -> None:
    engine = engine_of((0, "A", chain(3.0, 10.0)))
    engine.run(2.0)
    with pytest.raises(IllegalDecisionError, match="started at 1 on executor 0 has ended"):
        engine.stop([0], started=[1.0])
    engine.run(5.0)  # s0 ended at 3 s; s1's task runs on executor 0 from 3 s
    with pytest.raises(IllegalDecisionError, match="started at 0 on executor 0 has ended"):
        engine.stop([0], started=[0.0])
    idle = Cluster(2)
    with pytest.raises(IllegalDecisionError, match="runs no task: the task it ran has ended"):
        idle.stop([1], 0.0)
    with pytest.raises(IllegalDecisionError, match="does not exist"):
        idle.stop([2], 0.0)
    assert engine.cluster.preempted == 0 and not events(engine, "preempted")
    engine.run()
    assert events(engine, "job-done") == [(13.0, "job-done", 0, -1, 13.0)]


def test_a_gangs_tasks_are_stopped_together_or_not_at_all() -> None:
    engine = engine_of((0, "G", dag(("g", 2, 10.0, [], True))), executors=2)
    engine.run(1.0)
    with pytest.raises(IllegalDecisionError, match="is a gang: stop all of its running tasks"):
        engine.stop([0])
    engine.stop([0, 1])
    engine.run()
    assert events(engine, "launch", "preempted", "job-done") == [
        (0.0, "launch", 0, 0, (2, 2)),
        (1.0, "preempted", 0, 0, (0, 1.0)),
        (1.0, "preempted", 0, 0, (1, 1.0)),
        (1.0, "launch", 0, 0, (2, 2)),
        (11.0, "job-done", 0, -1, 11.0),
    ]


def test_a_run_that_stops_nothing_reports_as_before() -> None:
    engine = engine_of((0, "A", chain(10.0)))
    engine.run()
    result = engine.result("test", "fifo", 0)
    assert (result.preempted, result.preempted_seconds) == (0, 0.0)
    out = run_metrics(result).to_dict()
    assert not {"preempted", "lost_seconds", "lost_share"} & out.keys()
