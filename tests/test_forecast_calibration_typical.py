"""A forecast's score is taken relative to its refresh's error of the pool's typical stretch
(issue 80, item 1; `sim.forecast_calibration.rescaled`): every forecast of one refresh
shares that error, one draw per refresh (the cold burst's large, a warm one's small), so
scores carrying it do not transfer from one burst to the next. Scored as the refresh
would have forecast knowing the typical stretch as the pool knows it at the score, they
do; the forecast being widened carries its own refresh's error in its replays and shared
margin. Known answers, and the operator's book passing the ratio (each fails without)."""

from __future__ import annotations

import pytest

from idlegate.policy.heuristics import FifoScheduler
from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import LIVE_MIN_SCORES, calibrations, rescaled
from idlegate.sim.task_times import LiveTimes, TaskTimes
from tests.test_forecast_refresh import T0, busy_pool, refresh_of


def test_a_span_rescaled_by_hand() -> None:
    # made at 100, 50 s ahead at its median: a stretch 0.8 of the one drawn, 40 s ahead
    assert rescaled(Span(110.0, 150.0, 160.0), 100.0, 0.8) == pytest.approx((108.0, 140.0, 148.0))
    span = Span(110.0, 150.0, 160.0)
    assert rescaled(span, 100.0, 1.0) is span
    assert rescaled(Span(110.0, 150.0, float("inf")), 100.0, 2.0).high == float("inf")


def test_the_typical_stretch_is_the_geometric_mean_the_replays_draw_around() -> None:
    times = LiveTimes((1.0,), (0.8, 1.0, 1.25), (0.25, 0.75, 1.0), ended=3)
    # log-weights 0.25·log 0.8 + 0.5·0 + 0.25·log 1.25 = 0
    assert times.typical == pytest.approx(1.0)
    assert LiveTimes((1.0,), (2.0,), (1.0,), ended=1).typical == pytest.approx(2.0)


def scored(typical: float) -> float | None:
    """The margin of a live start calibration holding one refresh's forecasts, made at 0
    `lead` s ahead by a refresh whose typical stretch was 1.25 times the true one (its
    intervals all 25 % late), each recorded with `typical`, the pool's as known at the
    score over the refresh's."""
    cal = calibrations(live=True)["start"]
    cal.banded = False
    for lead, off in ((40.0, 0.10), (60.0, -0.02), (80.0, 0.15), (100.0, 0.0), (120.0, 0.08)):
        right = Span(0.95 * lead, lead, 1.05 * lead)  # (what knowing the stretch gives)
        late = Span(*(1.25 * t for t in right))
        cal.record(late, 0.0, lead * (1.0 + off), typical)
    return cal.margin()


def test_a_refreshs_error_of_the_typical_stretch_is_scored_out() -> None:
    # the right intervals' scores: 0.05, -0.03, 0.10, -0.05, 0.03 per second ahead; the
    # conformal rank ⌈6 · 0.8⌉ = 5th of 5: 0.10
    assert scored(1.0 / 1.25) == pytest.approx(0.10)
    # taken as it was, the refresh's error makes every start early: the scores are the
    # distance below the late intervals' bottom, 0.1875 ... and Q is not the right one
    assert scored(1.0) == pytest.approx((0.95 * 1.25 - 1.0) / 1.25 + 0.02 / 1.25, abs=1e-9)
    assert scored(1.0) != pytest.approx(0.10, abs=0.05)


def started_once_learned(restored: bool) -> tuple[float, float, float]:
    """A pool whose replays drew around a typical stretch over 1.3, then learned one 1.5
    times lower, and its waiting workflow's start scored (`restored`: its kept forecast
    read back after a restart, its refresh's stretch unknown): the score recorded, and
    the scores taken relative to the stretch learned and as made."""
    cluster = busy_pool(2)  # (one executor; w0 runs since T0, w1 of 100 s waits)
    times = TaskTimes()
    for ran in (130.0, 140.0, 150.0, 160.0, 170.0, 145.0, 155.0, 135.0, 165.0, 150.0):
        times.record(100.0, ran + 2.0, ran)
    refresh, _ = refresh_of(cluster, times=times)
    refresh.poke()
    kept = refresh.kept[1]
    assert kept.typical == pytest.approx(times.frozen().typical)
    assert kept.typical > 1.3  # (the stretches 1.3-1.7 its replays drew around)
    refresh.typical = kept.typical / 1.5  # (the pool's typical stretch, known better since)
    if restored:
        kept.typical = None
    cluster.advance(T0 + 130)
    cluster.task_finished(0, T0 + 130)
    while cluster.decide_once(FifoScheduler(), T0 + 130) is not None:
        pass
    refresh.score(T0 + 130)
    start = refresh.calibration["start"]
    assert len(start.scores) == 1 and LIVE_MIN_SCORES > 1
    expected = calibrations(live=True)["start"]
    expected.record(kept.start, kept.forecast.computed_at, T0 + 130, 1.0 / 1.5)
    as_made = calibrations(live=True)["start"]
    as_made.record(kept.start, kept.forecast.computed_at, T0 + 130)
    refresh.close()
    return start.scores[0], expected.scores[0], as_made.scores[0]


def test_the_operators_book_scores_a_forecast_relative_to_its_refreshs_typical_stretch() -> None:
    got, relative, as_made = started_once_learned(restored=False)
    assert got == pytest.approx(relative)
    assert got != pytest.approx(as_made, abs=1e-3)


def test_a_forecast_restored_after_a_restart_is_scored_as_made() -> None:
    # (its status keeps no typical stretch of its refresh: none is made up)
    got, relative, as_made = started_once_learned(restored=True)
    assert got == pytest.approx(as_made)
    assert got != pytest.approx(relative, abs=1e-3)
