"""No thrash (`idlegate.sim.reclaim_ledger`): the cooldown, the pool's budget a minute and
the grace of young lent tasks, each on a fake clock (the times are the test's own)."""

from __future__ import annotations

import pytest

from idlegate.errors import IdlegateError
from idlegate.sim.reclaim import Running
from idlegate.sim.reclaim_ledger import Calm, StopLedger, calm_victims
from idlegate.sim.reclaim_rules import Claimant, Eligible

POD = 1000
CLAIMANT = Claimant(queue=0, priority=5, need={"pods": POD})


def run(name: str, start: float, queue: int = 1) -> Running:
    return Running(name, queue, 0, start, {"pods": POD})


def of(*tasks: Running) -> Eligible:
    """Candidates as the rules would give them (queue 1 borrowing: unbounded here)."""
    return Eligible(tasks, {t.queue: "Reclaim" for t in tasks}, {})


def names(victims) -> list[str]:
    return [t.task for t in victims.tasks]


def test_a_stopped_task_is_not_stopped_again_within_its_cooldown():
    ledger = StopLedger(Calm(cooldown=300.0, grace=0.0))
    now = 1000.0
    x, y = run("x", start=900.0), run("y", start=100.0)  # (x loses less: it goes first)
    got = calm_victims(ledger, CLAIMANT, of(x, y), now, free={"pods": 0})
    assert got is not None and names(got) == ["x"]
    ledger.stopped(["x"], now)
    rerun = run("x", start=now + 10.0)  # (the same task, started again)
    for later, expected in ((now + 100.0, "y"), (now + 299.0, "y"), (now + 300.0, "x")):
        got = calm_victims(ledger, CLAIMANT, of(rerun, y), later, free={"pods": 0})
        assert got is not None and names(got) == [expected], later
    assert ledger.cooling("x", now + 299.0) and not ledger.cooling("x", now + 300.0)


def test_the_pool_stops_at_most_its_budget_in_any_minute():
    ledger = StopLedger(Calm(per_minute=3, grace=0.0))
    tasks = of(run("a", 10.0), run("b", 20.0), run("c", 30.0))
    ledger.stopped(["p", "q"], 100.0)
    assert ledger.left(100.0) == 1
    # two are needed, one is left: nothing is stopped (some of it would start nothing)
    assert (
        calm_victims(ledger, Claimant(0, 5, {"pods": 2 * POD}), tasks, 130.0, free={"pods": 0})
        is None
    )
    got = calm_victims(ledger, CLAIMANT, tasks, 130.0, free={"pods": 0})
    assert got is not None and names(got) == ["c"]
    ledger.stopped(["c"], 130.0)
    assert ledger.left(159.9) == 0
    assert calm_victims(ledger, CLAIMANT, tasks, 159.9, free={"pods": 0}) is None
    assert ledger.left(160.0) == 2  # (those of 100 s are a minute old: out of the window)
    assert ledger.left(190.0) == 3


def test_a_young_lent_task_is_spared_where_an_older_one_would_do():
    ledger = StopLedger(Calm(grace=60.0))
    now = 1000.0
    young, old = run("young", start=980.0), run("old", start=500.0)
    got = calm_victims(ledger, CLAIMANT, of(young, old), now, free={"pods": 0})
    assert got is not None and names(got) == ["old"]  # (though young loses less)
    got = calm_victims(ledger, CLAIMANT, of(young, run("old2", 930.0)), now, free={"pods": 0})
    assert got is not None and names(got) == ["old2"]  # (70 s old: past its grace)
    got = calm_victims(ledger, CLAIMANT, of(young, run("new", 950.0)), now, free={"pods": 0})
    assert got is not None and names(got) == ["young"]  # (both young: the cheaper)


def test_only_young_lent_tasks_are_stopped_when_nothing_else_would_do():
    ledger = StopLedger(Calm(grace=60.0))
    got = calm_victims(
        ledger, CLAIMANT, of(run("y1", 990.0), run("y2", 995.0)), 1000.0, free={"pods": 0}
    )
    assert got is not None and names(got) == ["y2"]


def test_the_queues_own_young_tasks_are_not_lent_and_have_no_grace():
    ledger = StopLedger(Calm(grace=60.0))
    own, lent = run("own", 990.0, queue=0), run("lent", 500.0)
    tasks = Eligible((own, lent), {0: "WithinQueue", 1: "Reclaim"}, {})
    got = calm_victims(ledger, CLAIMANT, tasks, 1000.0, free={"pods": 0})
    assert got is not None and names(got) == ["own"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cooldown": -1.0}, "cooldown -1.0 must be a number of seconds >= 0"),
        ({"grace": "1m"}, "grace '1m' must be a number of seconds"),
        ({"per_minute": 0}, "per_minute 0 must be at least 1"),
        ({"per_minute": 2.5}, "per_minute 2.5 must be a whole number"),
    ],
)
def test_bad_settings_are_one_sentence(fields, message):
    with pytest.raises(IdlegateError, match=message):
        Calm(**fields)


def test_a_long_ledger_answers_as_its_stops_say_and_forgets_the_cooled_ones():
    # a stop every 3 s for 30 min, a cooldown of 300 s: each task cools as stopped, and
    # those cooled down are forgotten from the oldest (the ledger stays about 100 long)
    ledger = StopLedger(Calm(cooldown=300.0))
    stops = [(f"t{i}", 3.0 * i) for i in range(600)]
    for i, (task, at) in enumerate(stops):
        ledger.stopped([task], at)
        for old, when in stops[max(0, i - 120) : i + 1]:
            assert ledger.cooling(old, at) == (at < when + 300.0), (old, at)
    assert len(ledger._last) <= 101
