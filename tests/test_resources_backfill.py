"""Backfilling with a reservation (`idlegate.policy.backfill`): on a resource pool a stage
that fits is not starved by one that does not, and the first that does not (the head) is
not delayed by later ones (EASY's rule)."""

from __future__ import annotations

import pytest

from idlegate.policy import make_scheduler
from idlegate.policy.backfill import shadow
from idlegate.policy.drf import pool_capacity
from idlegate.sim.cluster import Cluster
from idlegate.sim.dag import Dag
from idlegate.sim.protocol import WAIT, Decision, Job
from idlegate.sim.resources import ResourceVector
from idlegate.sim.spec import parse_workflow

R = ResourceVector.parse


def one(name: str, tasks: int, seconds: float, cpu: str, **more) -> Dag:
    spec = {"name": name, "tasks": tasks, "taskDurationSeconds": seconds, **more}
    spec["resources"] = {"cpu": cpu}
    return Dag.from_spec(parse_workflow({"stages": [spec]}))


def blocked_pool() -> tuple[Cluster, dict[str, Job]]:
    """8 CPUs, 10 executors. At 0 a 6-CPU task of 100 s starts; then (fifo order) the head,
    a 7-CPU task that fits only when it ends; a 200 s task of 2 CPUs, which fits now but
    would hold them past 100 s; two 10 s tasks of 1 CPU, which end long before."""
    c = Cluster(10, resources=R("cpu=8"))
    running = c.add_job(one("running", 1, 100, "6"), 0.0)
    c.apply(Decision(running.stages[0], 10), 0.0)
    jobs = {
        "head": c.add_job(one("head", 1, 10, "7"), 1.0),
        "long": c.add_job(one("long", 1, 200, "2"), 2.0),
        "short": c.add_job(one("short", 2, 10, "1"), 3.0),
    }
    return c, jobs


def test_the_head_s_reservation_is_when_enough_running_tasks_end():
    c, jobs = blocked_pool()
    capacity = pool_capacity(c)
    assert capacity is not None
    reservation = shadow(c, jobs["head"].stages[0], capacity)
    # at 100 s the 6-CPU task ends: 8 CPUs and 10 executors free, the head takes 7 and 1
    assert (reservation.at, reservation.pods, reservation.extra) == (100.0, 9, (1000,))


@pytest.mark.parametrize("rule", ["fifo", "srpt", "sjf", "sjf-cp"])
def test_a_stage_that_fits_starts_but_none_that_delays_the_head(rule):
    c, _ = blocked_pool()
    scheduler = make_scheduler(rule)
    first = scheduler.decide(c)
    # the short tasks fit and end by 100 s; the long one would hold 2 of the head's CPUs
    assert isinstance(first, Decision) and first.stage.name == "short"
    assert len(c.apply(first, 3.0)) == 2
    assert scheduler.decide(c) is WAIT
    c.task_finished(1, 13.0)  # the short tasks end ...
    c.task_finished(2, 13.0)
    assert make_scheduler(rule).decide(c) is WAIT  # ... and the long one still must wait
    assert c.task_finished(0, 100.0) is None  # the 6-CPU task ends: the head fits
    start = make_scheduler(rule).decide(c)
    assert isinstance(start, Decision) and start.stage.name == "head"


def test_a_later_stage_takes_only_the_extra_at_the_reservation():
    """A 200 s stage of 1-CPU tasks fits in the 1 CPU the head leaves at 100 s: one task
    (cap held + 1), not the 2 that fit now."""
    c = Cluster(10, resources=R("cpu=8"))
    running = c.add_job(one("running", 1, 100, "6"), 0.0)
    c.apply(Decision(running.stages[0], 10), 0.0)
    c.add_job(one("head", 1, 10, "7"), 1.0)
    c.add_job(one("long", 3, 200, "1"), 2.0)
    decision = make_scheduler("fifo").decide(c)
    assert isinstance(decision, Decision) and decision.stage.name == "long"
    assert decision.parallelism_cap == 1
    assert len(c.apply(decision, 2.0)) == 1


def test_without_a_reservation_fifo_would_delay_the_head():
    """The starvation case itself: on a pods-only pool, or with no estimate of when tasks
    end, the first stage that fits starts, whatever it does to the head."""
    c, _ = blocked_pool()
    c.running_tasks = None  # (a driver view without it)
    decision = make_scheduler("fifo").decide(c)
    assert isinstance(decision, Decision) and decision.stage.name == "long"


def test_a_gang_head_reserves_all_its_tasks_at_once():
    """A 5-CPU task runs until 100 s; the head, a gang of 2 x 3 CPUs, needs 6 of the 8 CPUs
    then, leaving 2. A later gang of 3 x 1 CPU for 200 s fits the 3 CPUs free now but not
    the 2 left beside the head, so it waits; one of 2 x 1 CPU starts."""
    c = Cluster(10, resources=R("cpu=8"))
    running = c.add_job(one("running", 1, 100, "5"), 0.0)
    c.apply(Decision(running.stages[0], 10), 0.0)
    head = c.add_job(one("head", 2, 10, "3", gang=True), 1.0)
    c.add_job(one("wide", 3, 200, "1", gang=True), 2.0)
    c.add_job(one("pair", 2, 200, "1", gang=True), 3.0)
    capacity = pool_capacity(c)
    assert capacity is not None
    reservation = shadow(c, head.stages[0], capacity)
    assert (reservation.at, reservation.pods, reservation.extra) == (100.0, 8, (2000,))
    decision = make_scheduler("fifo").decide(c)
    assert isinstance(decision, Decision) and decision.stage.name == "pair"
    assert len(c.apply(decision, 3.0)) == 2
