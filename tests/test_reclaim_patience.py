"""Less work lost by the rules (issues 82 and 96): a claimant waits for running tasks
expected to give it the room within its patience, and a stop must save at least half of
what it loses, the room coming anyway once the running tasks end
(`idlegate.sim.reclaim_patience`); known answers, then the rules on the engine's clock
(the forecast tests' pool: X's two tasks end at 200 s, Y's at 210 s, Z's at 220 s)."""

from __future__ import annotations

from math import inf, nan

import pytest

from idlegate.errors import IdlegateError
from idlegate.policy import make_scheduler
from idlegate.sim.reclaim_ledger import Calm
from idlegate.sim.reclaim_patience import OVERDUE_FRACTION, ending, expected_left, room_after
from tests.reclaim_helpers import events
from tests.test_reclaim_forecast import b_start, lent

POD = {"pods": 1000}


def test_a_tasks_expected_remaining_is_its_declared_duration_less_what_it_ran():
    assert expected_left(200.0, 50.0) == 150.0
    assert expected_left(200.0, 205.0) == OVERDUE_FRACTION * 200.0  # (overdue: about to end)
    assert expected_left(200.0, 250.0) == 50.0  # (as long as it has overrun, issue 96)
    assert expected_left(inf, 5.0) is None and expected_left(nan, 5.0) is None
    assert expected_left(0.0, 5.0) is None  # (none declared)


def test_a_task_is_ending_when_it_has_left_less_than_the_ratio_times_what_it_ran():
    assert ending(200.0, 140.0, 0.5)  # (60 s left < 70)
    assert not ending(200.0, 130.0, 0.5)  # (70 s left >= 65)
    assert not ending(200.0, 250.0, 0.5)  # (past its estimate: when it ends is not known)
    assert not ending(200.0, 140.0, 0.0) and not ending(inf, 140.0, 0.5)


def test_a_stop_saves_no_more_than_the_wait_for_the_room_coming_anyway():
    # the room comes in 50 s anyway: a task that ran 130 s (70 s left) saves 50 s < 65
    assert ending(200.0, 130.0, 0.5, saves=50.0)
    assert not ending(200.0, 80.0, 0.5, saves=50.0)  # (50 s >= 40)
    # past its estimate its remaining is not known, but the room's wait still bounds it
    assert ending(200.0, 250.0, 0.5, saves=100.0) and not ending(200.0, 250.0, 0.5)
    assert not ending(inf, 140.0, 0.5, saves=80.0) and ending(inf, 140.0, 0.5, saves=60.0)


def test_room_comes_when_the_tasks_ending_by_then_free_enough():
    free = [{"pods": 0}]
    assert room_after(POD, free, [(40.0, POD, None)]) == 40.0
    two = {"pods": 2000}
    assert room_after(two, free, [(10.0, POD, None), (50.0, POD, None)]) == 50.0
    assert room_after(two, free, [(20.0, POD, None), (10.0, POD, None)]) == 20.0
    assert room_after(POD, [{"pods": 1000}], []) == 0.0  # (it fits already)
    assert room_after(two, free, [(5.0, POD, None)]) == inf  # (never enough)


def test_on_nodes_the_room_must_come_on_one_node():
    nodes = [{"pods": 0}, {"pods": 0}]
    two = {"pods": 2000}
    spread = [(5.0, POD, 0), (6.0, POD, 1)]
    assert room_after(two, nodes, spread) == inf
    assert room_after(two, nodes, [*spread, (7.0, POD, 1)]) == 7.0
    assert room_after(POD, nodes, [(1.0, POD, None), (2.0, POD, 5)]) == inf


def test_an_owner_whose_room_comes_within_its_patience_waits_for_it():
    # at 175 s X's tasks end in 25 s, within the 30 s of patience: nothing is stopped
    engine = lent(175.0, decide="Rules", policy="fifo")
    engine.run()
    assert not events(engine, "preempted") and b_start(engine) == 200.0
    # without patience (nor the ending rule) the rules stop Z at once
    raw = lent(175.0, decide="Rules", policy="admission?patience=0&ending=0:fifo")
    raw.run()
    assert [e[0] for e in events(raw, "preempted")] == [175.0] and b_start(raw) == 175.0


def test_an_owner_whose_room_comes_later_than_its_patience_stops_a_task():
    # at 100 s X's tasks end in 100 s, past the 30 s of patience: Z (run 80 s of 200)
    # is stopped, saving 100 s, more than half the 80 s it loses
    engine = lent(100.0, decide="Rules", policy="fifo")
    engine.run()
    assert events(engine, "preempted") == [(100.0, "preempted", 2, 0, (3, 80.0))]
    assert b_start(engine) == 100.0


def test_a_stop_that_saves_less_than_half_what_it_loses_is_not_made():
    # at 150 s X's tasks end in 50 s, past the patience; Z has run 130 s (70 s left), so
    # stopping it would save B 50 s for 130 s lost (issue 96): nothing is stopped
    engine = lent(150.0, decide="Rules", policy="fifo")
    engine.run()
    assert not events(engine, "preempted") and b_start(engine) == 200.0
    # the rules before issue 96 read only Z's own remaining (70 s >= 65) and stopped it
    raw = lent(150.0, decide="Rules", policy="admission?ending=0:fifo")
    raw.run()
    assert events(raw, "preempted") == [(150.0, "preempted", 2, 0, (3, 130.0))]


def test_a_waiting_claimant_has_the_question_asked_again_when_its_patience_ends():
    engine = lent(185.0, decide="Rules", policy="fifo")
    engine.run(186.0)
    admission = engine.cluster.admission
    assert admission is not None and admission.reclaimer is not None
    assert admission.reclaimer.wake == 185.0 + Calm().patience
    assert admission.next_bound() == 215.0  # (the driver's timer: no bound on these queues)


def test_tasks_near_their_declared_end_are_no_victims():
    # at 160 s X has run 160 s of 200, Y 150, Z 140: each has less left than half what it
    # ran; X ends in 40 s, past the patience: still nothing is stopped, B waits for X
    engine = lent(160.0, decide="Rules", policy="fifo")
    engine.run()
    assert not events(engine, "preempted") and b_start(engine) == 200.0
    # without the ending rule Z, which lost least, is stopped
    raw = lent(160.0, decide="Rules", policy="admission?ending=0:fifo")
    raw.run()
    assert events(raw, "preempted") == [(160.0, "preempted", 2, 0, (3, 140.0))]


def test_the_settings_are_checked():
    with pytest.raises(IdlegateError, match="patience -1 must be a number of seconds >= 0"):
        Calm(patience=-1)
    with pytest.raises(IdlegateError, match=r"ending -0.5 must be a ratio >= 0"):
        Calm(ending=-0.5)
    with pytest.raises(IdlegateError, match="admission patience 'soon' must be a number"):
        make_scheduler("admission?patience=soon:fifo")


def test_a_task_past_its_bound_stops_a_task_near_its_end():
    # at 160 s every lent task is near its end (as above) and B's bound is 10 s: B waits
    # until its bound, 170 s, then the ending rule spares none and Z, which lost least, is
    # stopped; before, B waited for X until 200 s, 30 s past its bound
    engine = lent(160.0, decide="Rules", bound=10.0, policy="fifo")
    engine.run()
    assert events(engine, "preempted") == [(170.0, "preempted", 2, 0, (3, 150.0))]
    assert b_start(engine) == 170.0


def test_the_patience_ends_at_the_bound_when_the_bound_is_shorter():
    # at 175 s X's tasks end in 25 s, within the 30 s of patience, but B's bound is 10 s:
    # B waits only until 185 s, then Z is stopped (before: B started at 200 s)
    engine = lent(175.0, decide="Rules", bound=10.0, policy="fifo")
    engine.run()
    assert events(engine, "preempted") == [(185.0, "preempted", 2, 0, (3, 165.0))]
    assert b_start(engine) == 185.0
