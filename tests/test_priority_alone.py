"""Issue 93, item 1: a pool without queues starts its workflows in the order its
positions show, priority first, as a queue does (`idlegate.sim.queued`)."""

from __future__ import annotations

import pytest

from idlegate.api.queueing import priority_classes
from idlegate.api.visibility import pending
from idlegate.policy import make_scheduler
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.spec import parse_workflow

pytestmark = pytest.mark.looptime


def one_task(seconds: float) -> Dag:
    stage = {"name": "s", "tasks": 1, "taskDurationSeconds": seconds}
    return Dag.from_spec(parse_workflow({"stages": [stage]}))


@pytest.mark.asyncio
@pytest.mark.parametrize("rule", ["fifo", "srpt", "fair", "default"])
async def test_the_urgent_workflow_starts_next_as_its_position_says(rule):
    """The issue's probe: room for one task, three workflows a second apart, the third of
    a PriorityClass of 1000 (and the longest, so srpt alone would start it last): it is
    shown at position 1, and it is the one that starts when the room frees."""
    from tests.operator_fakes import harness, stage

    h = harness(pool=1, scheduler=make_scheduler(rule))
    h.pools.priorities.update(priority_classes({"metadata": {"name": "urgent"}, "value": 1000}))
    await h.submit("first", {"stages": [stage("s", duration=10)]})
    h.clock.advance(1)
    await h.submit("second", {"stages": [stage("s", duration=10)]})
    h.clock.advance(1)
    urgent = {"stages": [stage("s", duration=60)], "priorityClassName": "urgent"}
    await h.submit("urgent", urgent)
    assert h.released() == ["first-s-0"]
    (pool,) = pending(h.pools)["pools"]
    (queue,) = pool["queues"]
    assert [(w["position"], w["name"]) for w in queue["waiting"]] == [
        (1, "urgent"),
        (2, "second"),
    ]
    await h.finish("first-s-0", after=8)
    assert h.released() == ["urgent-s-0"]
    await h.finish("urgent-s-0", after=60)
    assert h.released() == ["second-s-0"]


@pytest.mark.parametrize("rule", ["fifo", "srpt", "sjf-cp", "fair"])
def test_the_order_of_starts_is_the_order_of_positions_in_a_pool_without_queues(rule):
    """Six workflows of three priorities on one executor: once the first started, the
    positions the admission's result gives the five others are the order they start in,
    the highest priorities first."""
    cluster = Cluster(1)
    scheduler = make_scheduler(rule)
    for i, (seconds, priority) in enumerate([(5, 0), (3, 0), (9, 7), (1, 0), (8, 7), (2, 3)]):
        job = cluster.add_job(one_task(seconds), 0.0, f"w{i}")
        job.priority = priority
        cluster.touch(job)
    started, now, shown = [], 0.0, None
    while len(started) < 6:
        while cluster.decide_once(scheduler, now) is not None:
            pass
        (running,) = [j for j in cluster.jobs if j.held]
        started.append(running.name)
        if shown is None:
            result = cluster.admission_result()
            waiting = [(result.position(j), j.name) for j in cluster.jobs if j is not running]
            shown = [name for _, name in sorted(waiting)]
        now += running.dag.total_work
        cluster.task_finished(cluster.running_tasks()[0][0], now)
    assert started[1:] == shown
    assert started[:2] in (["w2", "w4"], ["w4", "w2"]) and started[2] == "w5"


def test_a_pool_whose_workflows_are_all_of_priority_0_decides_without_the_admission():
    """What the simulator's runs and training see: no admission built, nothing in its way."""
    cluster = Cluster(2)
    scheduler = make_scheduler("srpt")
    for seconds in (5, 3, 9):
        cluster.add_job(one_task(seconds), 0.0)
    while cluster.decide_once(scheduler, 0.0) is not None:
        pass
    assert cluster.admission_deciding() is None
    assert cluster._alone is None
    assert sorted(j.dag.total_work for j in cluster.jobs if j.held) == [3.0, 5.0]
