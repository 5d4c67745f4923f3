"""The examples and theorem that pin down idle-slot semantics (Duan & Wu 2021/2022)."""

from __future__ import annotations

import pytest

from idlegate.sim.engine import simulate
from tests.helpers import Scripted, chain, fifo_rule, idle_once, jcts, sjf_rule, workload


def test_motivating_example_without_idle():
    w = workload((0, "A", chain(20)), (2, "B", chain(4)))
    r = simulate(w, Scripted(fifo_rule), trace=True)
    assert jcts(r) == {"A": 20, "B": 22}
    assert sum(jcts(r).values()) / 2 == 21
    assert [e[:3] for e in r.trace] == [
        (0, "arrive", 0),
        (0, "launch", 0),
        (2, "arrive", 1),
        (20, "stage-done", 0),
        (20, "job-done", 0),
        (20, "launch", 1),
        (24, "stage-done", 1),
        (24, "job-done", 1),
    ]


def test_motivating_example_with_two_second_idle_slot():
    w = workload((0, "A", chain(20)), (2, "B", chain(4)))
    r = simulate(w, idle_once("A", 0, 2.0), trace=True)
    assert jcts(r) == {"A": 26, "B": 4}
    assert sum(jcts(r).values()) / 2 == 15
    kinds = [(t, k) for t, k, *_ in r.trace]
    # the slot's end coincides with B's arrival: both are applied before deciding
    assert kinds[:5] == [(0, "arrive"), (0, "idle"), (2, "arrive"), (2, "idle-end"), (2, "launch")]
    assert r.records[0].idle_inserted == 2.0


def test_chain_example():
    def run(delay: float) -> float:
        w = workload((0, "J1", chain(10, 10, 10)), (10, "J2", chain(10)))
        sched = idle_once("J1", 1, delay, then=fifo_rule) if delay else Scripted(fifo_rule)
        r = simulate(w, sched)
        return sum(jcts(r).values()) / 2

    assert run(0) == 30
    assert run(1e-3) == 25


def _avg_jct_two_jobs(l1: int, l2: int, delta: int, delay: int) -> float:
    """J1 (length l1) at t=10, J2 (l2) at 10+delta, one executor, `delay` before J1, then SJF."""
    a1, a2 = 10, 10 + delta
    jobs = sorted([(a1, "J1", chain(l1)), (a2, "J2", chain(l2))], key=lambda j: j[0])
    sched = idle_once("J1", 0, delay) if delay else Scripted(sjf_rule)
    return sum(jcts(simulate(workload(*jobs), sched)).values()) / 2


@pytest.mark.parametrize("l1", [1, 2, 3, 5, 8])
def test_theorem_1_brute_force(l1):
    """Some idle slot before J1 lowers the average JCT iff l1 > l2 and 0 < a2-a1 < (l1-l2)/2."""
    for l2 in range(1, 9):
        for delta in range(-4, 10):
            base = _avg_jct_two_jobs(l1, l2, delta, 0)
            best = min(_avg_jct_two_jobs(l1, l2, delta, d) for d in range(1, 12))
            predicted = l1 > l2 and 0 < delta < (l1 - l2) / 2
            assert (best < base) == predicted, (l1, l2, delta, base, best)
