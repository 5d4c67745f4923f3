"""The room a stop frees goes to the first queue in the admission's order (issue 96): a
claimant behind one that waits for room coming soon stops nothing, as its stop would
serve the first; a claimant past its wait bound goes first. Hand-built pools on the
engine's clock, each checked against the answer worked out by hand.

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


def test_a_claimant_behind_one_waiting_for_room_stops_nothing():
    engine = pool()
    engine.run()
    # b waits for B1's end (10 s, within its patience); c's stop would only give b that
    # room sooner, so nothing is stopped until 110 s: then B2 takes B1's room, and c,
    # first now, stops one of A's lent tasks (run 110 s; c's room comes at 300 s). Before
    # issue 96 c stopped one of A's tasks at 100 s, whose room went to b, then another
    assert [(t, job) for t, _k, job, _s, _i in events(engine, "preempted")] == [(110.0, 0)]
    assert starts(engine)[3] == 110.0 and starts(engine)[4] == 110.0


def test_a_claimant_past_its_bound_comes_first():
    # c's bound is 5 s: at 105 s C2 is past it, so c goes before b, and its stop is made
    # then (past its bound the ending rule spares nothing); B2 still waits for B1
    engine = pool(c_bound=5.0)
    engine.run()
    assert [(t, job) for t, _k, job, _s, _i in events(engine, "preempted")] == [(105.0, 0)]
    assert starts(engine)[4] == 105.0 and starts(engine)[3] == 110.0


def test_why_the_claimant_behind_waits_is_said():
    engine = pool()
    engine.run(105.0)
    reclaimer = engine.cluster.admission.reclaimer  # type: ignore[union-attr]
    assert reclaimer is not None
    said = reclaimer.still_for(2)
    assert said is not None and said.startswith("queue b comes first in the admission's order")
    assert reclaimer.still_for(1) is not None and "patience holds" in reclaimer.still_for(1)
