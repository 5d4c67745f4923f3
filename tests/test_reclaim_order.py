"""The room a stop frees goes to the first queue in the admission's order (issue 96): a
claimant behind one whose stops were declined stops nothing, as its stop would serve
the first; behind one that waits on its patience it may, counting the room the first
waits for as its own once the first is served; a claimant past its wait bound goes
first. Hand-built pools on the engine's clock, each checked against the answer worked
out by hand.

The pool (5 pods): queue a (nominal 1) runs A, three tasks of 300 s from 0 s, two of them
on lent quota; queue b (nominal 2) runs B1, one task of 110 s; queue c (nominal 2) runs C1,
one task of 300 s. At 100 s B2 (queue b) and C2 (queue c), one task of 5 s each, arrive:
neither fits. b and c hold as much, so b comes first in the admission's order; B1 gives
b the room at 110 s, within its patience, while c's room comes only at 300 s."""

from __future__ import annotations

from idlegate.sim.engine import Engine, JobArrival
from idlegate.sim.queues import Preemption, QueueSpec
from tests.helpers import chain
from tests.reclaim_helpers import engine_of, events

ANY = Preemption(reclaim="Any")


def pool(policy: str = "fifo", c_bound: float | None = None) -> Engine:
    """The module docstring's pool, every queue ``reclaim: Any`` (c's wait bound
    `c_bound`, none if None)."""
    bound = {} if c_bound is None else {"wait_bound": c_bound}
    queues = (
        QueueSpec("a", {"pods": 1000}, preemption=ANY),
        QueueSpec("b", {"pods": 2000}, preemption=ANY),
        QueueSpec("c", {"pods": 2000}, preemption=ANY, **bound),
    )
    jobs = (
        JobArrival(0.0, "A", chain(300.0, tasks=3), queue="a"),
        JobArrival(0.0, "B1", chain(110.0), queue="b"),
        JobArrival(0.0, "C1", chain(300.0), queue="c"),
        JobArrival(100.0, "B2", chain(5.0), queue="b"),
        JobArrival(100.0, "C2", chain(5.0), queue="c"),
    )
    return engine_of(*jobs, executors=5, policy=policy, queues=queues)


def starts(engine: Engine) -> dict[int, float]:
    """Each workflow's first launch."""
    first: dict[int, float] = {}
    for t, _kind, job, _stage, _info in events(engine, "launch"):
        first.setdefault(job, t)
    return first


def test_a_claimant_behind_one_waiting_on_its_patience_stops_once_for_both():
    engine = pool()
    engine.run()
    # b waits for B1's end (10 s, within its patience); c's room comes only at 300 s, so
    # c stops one of A's lent tasks at 100 s (run 100 s): B2 takes its room, and B1's end
    # at 110 s, which b no longer needs, is c's room coming, so c stops nothing more (B2's
    # own end, at 105 s, comes first and C2 takes it).
    # Before issue 96 c stopped a second task at 100 s (the first's room went to b); with
    # the claimants behind waiting for a patient one, c stopped one at 110 s (run 110 s)
    assert [(t, job) for t, _k, job, _s, _i in events(engine, "preempted")] == [(100.0, 0)]
    assert starts(engine)[3] == 100.0 and starts(engine)[4] == 105.0


def test_a_claimant_past_its_bound_comes_first():
    # b's stops were declined, so c, behind it, stops nothing while b comes first; c's
    # bound is 5 s: at 105 s C2 is past it, so c goes before b, and its stop is made then
    # (past its bound the ending rule spares nothing); B2 still waits for B1. Without the
    # bound c waits behind b, stops nothing, and C2 starts at 115 s, as B2 ends
    engine = pool(c_bound=5.0)
    engine.run(99.0)
    reclaimer = engine.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer is not None
    reclaimer.declined[1] = 200.0  # (a verdict declined b's stops: b waits for room)
    engine.run()
    assert [(t, job) for t, _k, job, _s, _i in events(engine, "preempted")] == [(105.0, 0)]
    assert starts(engine)[4] == 105.0 and starts(engine)[3] == 110.0


def test_a_claimant_behind_one_whose_stops_were_declined_waits_and_is_told_why():
    engine = pool()
    engine.run(99.0)
    reclaimer = engine.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer is not None
    reclaimer.declined[1] = 200.0  # (a verdict declined b's stops: b waits for room)
    engine.run(105.0)
    assert not events(engine, "preempted")
    said = reclaimer.still_for(2)
    assert said is not None and said.startswith("queue b comes first in the admission's order")
    assert reclaimer.still_for(1) is not None and "declined" in reclaimer.still_for(1)


def test_a_stop_saves_the_wait_for_all_its_queue_lacks_not_for_its_own_tasks_ends():
    # pool of 5: a (nominal 1) runs A, four tasks of 300 s, three on b's quota; b (nominal
    # 4) runs B1, a chain of 5 s tasks, so one of its own tasks ends every 5 s. B2, four
    # tasks of 100 s, comes at 52 s: b lacks three tasks' room, which comes back only as
    # A's tasks end at 300 s; B1's ends pass room between b's own tasks (fifo gives it to
    # B1's next stage), so its patience does not wait for them either: one of A's tasks
    # (run 52 s of 300) is stopped at once, saving 248 s of what b lacks (issue 96)
    queues = (
        QueueSpec("a", {"pods": 1000}, preemption=ANY),
        QueueSpec("b", {"pods": 4000}, preemption=ANY),
    )
    jobs = (
        JobArrival(0.0, "A", chain(300.0, tasks=4), queue="a"),
        JobArrival(0.0, "B1", chain(*[5.0] * 40), queue="b"),
        JobArrival(52.0, "B2", chain(100.0, tasks=4), queue="b"),
    )
    engine = engine_of(*jobs, executors=5, queues=queues)
    engine.run()
    first = events(engine, "preempted")[0]
    assert first[0] == 52.0 and first[2] == 0 and first[4][1] == 52.0


def backlogged(waiting: int, lenders: int = 0) -> Engine:
    """Pool of 3: a (nominal 1) runs A, three tasks of 300 s, two on b's quota, with
    `lenders` more of a's workflows waiting behind it; at 250 s b's B (one task of 5 s)
    comes, with `waiting` more one-task workflows of b behind it; nothing of b runs."""
    queues = (
        QueueSpec("a", {"pods": 1000}, preemption=ANY),
        QueueSpec("b", {"pods": 2000}, preemption=ANY),
    )
    jobs = (
        JobArrival(0.0, "A", chain(300.0, tasks=3), queue="a"),
        *(JobArrival(1.0, f"A{i}", chain(300.0), queue="a") for i in range(lenders)),
        JobArrival(250.0, "B", chain(5.0), queue="b"),
        *(JobArrival(250.0, f"B{i}", chain(5.0), queue="b") for i in range(waiting)),
    )
    return engine_of(*jobs, executors=3, queues=queues)


def test_a_stop_is_weighed_by_the_workflows_the_claimant_has_waiting():
    # alone, B would wait 50 s for A's end (past its patience of 30 s), but a's tasks have
    # run 250 s: 50 s saved is less than half of that, so none is stopped
    engine = backlogged(0)
    engine.run()
    assert not events(engine, "preempted") and starts(engine)[1] == 300.0
    # with nine more of b's workflows waiting and none of b's running, a second given
    # back to b is worth 1 + 9 of them: 50 s saved so weighed (500 s) is more than half
    # of 250 s, and the two lent tasks are stopped at once
    engine = backlogged(9)
    engine.run()
    assert [t for t, *_rest in events(engine, "preempted")] == [250.0, 250.0]
    assert starts(engine)[1] == 250.0
    # ten of a's workflows waiting change nothing: a runs those tasks on quota it
    # borrows, so its backlog has no claim on it (weighed by it, 1 + 10/3, the stop
    # would not pay: 500 s against 0.5 x 4.33 x 250 s)
    engine = backlogged(9, lenders=10)
    engine.run()
    assert [t for t, *_rest in events(engine, "preempted")] == [250.0, 250.0]
