"""Which running tasks a waiting task may stop (`idlegate.sim.reclaim_rules`), and the
Kueue-like baseline's choice (`idlegate.sim.reclaim_baselines`): known answers on
hand-built pools of three queues and 3 to 5 tasks."""

from __future__ import annotations

from typing import Any

from idlegate.sim.queues import Preemption, QueueSpec
from idlegate.sim.reclaim import Bound, Running, choose_victims
from idlegate.sim.reclaim_baselines import kueue_victims
from idlegate.sim.reclaim_rules import BORROWING, RECLAIM, WITHIN_QUEUE, Claimant, eligible

POD = 1000
NOW = 100.0


def pool(a: Preemption, **a_fields: Any) -> list[QueueSpec]:
    """Queues a (the waiting task's, with `a`), b and c, 2 pods of nominal quota each."""
    return [
        QueueSpec("a", {"pods": 2 * POD}, preemption=a, **a_fields),
        QueueSpec("b", {"pods": 2 * POD}),
        QueueSpec("c", {"pods": 2 * POD}),
    ]


def run(name: str, queue: int, priority: int, start: float, **more: Any) -> Running:
    return Running(name, queue, priority, start, {"pods": POD}, **more)


RUNNING = [
    run("a1", 0, 0, 50.0),
    run("b1", 1, 0, 10.0),
    run("b2", 1, 1, 20.0),
    run("b3", 1, 5, 30.0),
    run("c1", 2, 0, 5.0),
]
USAGE = [{"pods": POD}, {"pods": 3 * POD}, {"pods": POD}]  # (b borrows one pod)


def names(tasks) -> list[str]:
    return [t.task for t in tasks]


def test_by_default_no_task_may_be_stopped():
    got = eligible(Claimant(0, 9, {"pods": POD}), pool(Preemption()), USAGE, RUNNING)
    assert got.candidates == () and not got.borrowed and not got.limits


def test_reclaim_lower_priority_takes_from_borrowing_queues_below_the_task():
    got = eligible(Claimant(0, 2, {"pods": POD}), pool(Preemption("LowerPriority")), USAGE, RUNNING)
    assert names(got.candidates) == ["b1", "b2"]  # (not b3: priority 5; not c: within)
    assert got.borrowed == {1: {"pods": POD}}
    assert {got.reason(t) for t in got.candidates} == {RECLAIM}


def test_reclaim_any_takes_from_borrowing_queues_whatever_their_priority():
    got = eligible(Claimant(0, 0, {"pods": POD}), pool(Preemption("Any")), USAGE, RUNNING)
    assert names(got.candidates) == ["b1", "b2", "b3"]


def test_within_queue_takes_the_queues_own_tasks_of_lower_priority():
    got = eligible(
        Claimant(0, 1, {"pods": POD}),
        pool(Preemption(within_queue="LowerPriority")),
        USAGE,
        RUNNING,
    )
    assert names(got.candidates) == ["a1"] and got.reason(got.candidates[0]) == WITHIN_QUEUE
    assert not eligible(
        Claimant(0, 0, {"pods": POD}),
        pool(Preemption(within_queue="LowerPriority")),
        USAGE,
        RUNNING,
    ).candidates  # (a1 is of the same priority)


def test_a_task_that_would_borrow_takes_only_below_its_borrow_below():
    full = [{"pods": 2 * POD}, *USAGE[1:]]  # (a at its nominal quota: the task would borrow)
    settings = Preemption("Any", borrow_below=1)
    got = eligible(Claimant(0, 5, {"pods": POD}), pool(settings), full, RUNNING)
    assert names(got.candidates) == ["b1"] and got.reason(got.candidates[0]) == BORROWING
    assert not eligible(
        Claimant(0, 5, {"pods": POD}), pool(Preemption("Any")), full, RUNNING
    ).candidates


def test_a_queue_above_its_quota_only_on_what_the_task_does_not_need_lends_nothing_back():
    queues = [
        QueueSpec("a", {"pods": 2 * POD, "cpu": 2000}, preemption=Preemption("Any")),
        QueueSpec("b", {"pods": 2 * POD, "cpu": 2000}),
    ]
    usage = [{}, {"pods": 2 * POD, "cpu": 3000}]
    tasks = [Running("b1", 1, 0, 10.0, {"pods": POD, "cpu": 1500})]
    assert not eligible(Claimant(0, 0, {"pods": POD}), queues, usage, tasks).candidates
    got = eligible(Claimant(0, 0, {"pods": POD, "cpu": 1000}), queues, usage, tasks)
    assert names(got.candidates) == ["b1"] and got.borrowed == {1: {"cpu": 1000}}


def test_a_borrowing_task_is_bounded_by_its_borrowing_limit_which_only_its_queue_frees():
    queues = pool(Preemption(within_queue="LowerPriority"), borrowing_limit={"pods": POD})
    usage = [{"pods": 3 * POD}, {"pods": POD}, {"pods": POD}]
    got = eligible(Claimant(0, 3, {"pods": POD}), queues, usage, RUNNING)
    assert got.limits == (Bound({"pods": 0}, frozenset({0})),)
    chosen = choose_victims(
        {"pods": POD}, got.candidates, NOW, free={"pods": POD}, limits=got.limits
    )
    assert chosen is not None and names(chosen.tasks) == ["a1"]


def test_a_task_the_cohort_does_not_lend_to_is_bounded_by_its_nominal_quota():
    # a at its nominal quota, the pool with room but nothing lent: only a's own tasks help
    queues = pool(Preemption(within_queue="LowerPriority"))
    usage = [{"pods": 2 * POD}, {"pods": POD}, {"pods": POD}]
    got = eligible(Claimant(0, 3, {"pods": POD}), queues, usage, RUNNING, lends=False)
    assert got.limits == (Bound({"pods": 0}, frozenset({0})),)
    assert not eligible(Claimant(0, 3, {"pods": POD}), queues, usage, RUNNING).limits
    chosen = choose_victims(
        {"pods": POD}, got.candidates, NOW, free={"pods": 2 * POD}, limits=got.limits
    )
    assert chosen is not None and names(chosen.tasks) == ["a1"]


def test_the_rules_and_the_choice_together():
    got = eligible(Claimant(0, 2, {"pods": POD}), pool(Preemption("LowerPriority")), USAGE, RUNNING)
    chosen = choose_victims(
        {"pods": POD}, got.candidates, NOW, free={"pods": 0}, borrowed=got.borrowed
    )
    assert chosen is not None and names(chosen.tasks) == ["b2"]  # (it has run least)
    two = choose_victims(
        {"pods": 2 * POD}, got.candidates, NOW, free={"pods": 0}, borrowed=got.borrowed
    )
    assert two is None  # (b borrows one pod: it keeps its nominal quota)


# -- the Kueue-like baseline -----------------------------------------------------------


def flow(
    name: str,
    workflow: str,
    queue: int,
    priority: int,
    start: float,
    admitted: float,
    pods: int = 1,
) -> Running:
    return Running(
        name, queue, priority, start, {"pods": pods * POD}, workflow=workflow, admitted=admitted
    )


def test_kueue_stops_the_newest_admitted_workflow_where_ours_stops_the_cheapest_task():
    tasks = [
        flow("t1", "old", 1, 0, 10.0, admitted=10.0),
        flow("t2", "old", 1, 0, 95.0, admitted=10.0),  # (5 s run)
        flow("t3", "new", 1, 0, 60.0, admitted=50.0),  # (40 s run)
    ]
    ours = choose_victims({"pods": POD}, tasks, NOW, free={"pods": 0})
    theirs = kueue_victims({"pods": POD}, tasks, NOW, 0, free={"pods": 0})
    assert ours is not None and names(ours.tasks) == ["t2"] and ours.seconds == 5.0
    assert theirs is not None and names(theirs.tasks) == ["t3"] and theirs.seconds == 40.0


def test_kueue_stops_whole_workflows_lowest_priority_and_other_queues_first():
    tasks = [
        flow("own", "w0", 0, 0, 99.0, admitted=99.0),
        flow("hi", "w1", 1, 1, 99.0, admitted=99.0),
        flow("lo1", "w2", 2, 0, 10.0, admitted=10.0),
        flow("lo2", "w2", 2, 0, 20.0, admitted=10.0),
    ]
    got = kueue_victims({"pods": POD}, tasks, NOW, 0, free={"pods": 0})
    assert got is not None and names(got.tasks) == ["lo1", "lo2"] and got.seconds == 170.0


def test_kueue_gives_back_what_is_not_needed_and_skips_a_queue_that_borrows_no_more():
    tasks = [
        flow("a", "wa", 1, 0, 90.0, admitted=90.0),
        flow("b", "wb", 1, 0, 80.0, admitted=80.0, pods=2),
    ]
    got = kueue_victims({"pods": 2 * POD}, tasks, NOW, 0, free={"pods": 0})
    assert got is not None and names(got.tasks) == ["b"]  # (wa taken first, then given back)
    more = [*tasks, flow("c", "wc", 2, 0, 10.0, admitted=10.0)]
    got = kueue_victims(
        {"pods": 2 * POD}, more, NOW, 0, free={"pods": 0}, borrowed={1: {"pods": POD}}
    )
    assert got is not None and names(got.tasks) == ["a", "c"]  # (wb skipped: 1 borrows no more)
    assert kueue_victims({"pods": 9 * POD}, more, NOW, 0, free={"pods": 0}) is None
    fits_now = kueue_victims({"pods": POD}, more, NOW, 0, free={"pods": POD})
    assert fits_now is not None and fits_now.tasks == ()
