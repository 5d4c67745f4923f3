"""A cold live pool's forecasts share one error: the pool's average task time, known from
its few ended tasks (issue 80, item 1; `sim.forecast_calibration.shared_margin`). Its
replays draw that error once each, so their spread holds it only when they are many; the
part they leave out, s·√(2/R) at the interval's top's level, widens a start, on top of
the pool's prior or of its scores' quantile (its scores are free of their refreshes'
error: tests/test_forecast_calibration_typical.py). Known answers, a drawn check of the
coverage it gives one replay, and the refresh that widens by it (which fails without it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import (
    FLOOR,
    LIVE_MIN_SCORES,
    TOP,
    Calibration,
    calibrations,
    shared_margin,
)
from idlegate.sim.task_times import LiveTimes, TaskTimes, _error
from tests.test_forecast_refresh import busy_pool, refresh_of


def test_the_shared_margin_by_hand() -> None:
    assert abs(TOP - 1.2816) < 1e-4
    # one replay: nothing of the error spread; the truth lies s·√2 from it
    assert shared_margin(0.1, 1) == pytest.approx(math.exp(1.2816 * 0.1 * math.sqrt(2)) - 1, 1e-4)
    assert shared_margin(0.1, 1) == pytest.approx(0.1987, abs=1e-4)
    assert shared_margin(0.1, 2) == pytest.approx(0.1367, abs=1e-4)  # (√(2/2) = 1)
    assert shared_margin(0.1, 200) == pytest.approx(0.0129, abs=1e-4)  # (many: it goes)
    assert shared_margin(0.0, 1) == 0.0 and shared_margin(0.1, 0) == 0.0


def test_one_replay_widened_by_it_holds_the_shared_error_at_the_tops_level() -> None:
    # the truth's log error z* and the replay's own draw z₁, each N(0, s): the replay
    # (a point) widened by the margin has the truth above its top 10 % of the time
    s, rng = 0.15, np.random.default_rng(7)
    truth, drawn = rng.normal(0.0, s, 20_000), rng.normal(0.0, s, 20_000)
    top = np.exp(drawn) * (1.0 + shared_margin(s, 1))
    above = float(np.mean(np.exp(truth) > top))
    assert above == pytest.approx(0.10, abs=0.01)
    # without it, the point itself: the truth above it half the time
    assert float(np.mean(truth > drawn)) == pytest.approx(0.5, abs=0.02)


def test_it_adds_to_the_prior_and_then_to_the_pools_own_scores() -> None:
    cal = calibrations(live=True)["start"]
    cal.prior, cal.shared = 0.25, 0.2
    assert cal.margin(100.0) == pytest.approx(0.45)
    span = Span(190.0, 200.0, 210.0)  # (made at 0: 200 s ahead)
    assert cal.widen(span, 0.0, earliest=0.0).high == pytest.approx(210.0 + 0.45 * 200.0)
    for _ in range(LIVE_MIN_SCORES):  # (four scores, each 0.1 past their top)
        cal.record(Span(90.0, 100.0, 100.0), 0.0, 110.0)
    # its scores' quantile, and this refresh's own unspread error on top: the scores are
    # free of their refreshes' (`rescaled`), so none of this one's is in them
    assert cal.margin(100.0) == pytest.approx(0.1 + 0.2)
    cal.shared = 0.0
    assert cal.margin(100.0) == pytest.approx(0.1)
    # a waiting finish takes the start's margin over its wait: the shared error too
    fresh = calibrations(live=True)
    fresh["start"].prior, fresh["start"].shared = 0.25, 0.2
    finish = fresh["finish"].widen(Span(290.0, 300.0, 310.0), 0.0, start=span)
    assert finish.high == pytest.approx(310.0 + 0.45 * 200.0)
    # the simulator's calibrations are untouched: none is set there
    assert all(c.shared == 0.0 for c in calibrations().values())


def test_a_replays_shift_is_drawn_from_the_spread_it_says() -> None:
    times = LiveTimes((1.0, 3.0), (0.8, 1.0, 1.3), (0.3, 0.6, 1.0), ended=3)
    weights = np.diff(np.asarray((0.0, 0.3, 0.6, 1.0)))
    assert times.spread[1] == pytest.approx(_error(np.log([0.8, 1.0, 1.3]), weights, 3))
    assert times.spread[0] == pytest.approx(_error(np.asarray([1.0, 3.0]), None, 2))
    assert times.spread[2] == 0.0  # (no delays)
    rng, again = np.random.default_rng(3), np.random.default_rng(3)
    times.begin(rng)
    z = again.standard_normal(2)
    assert times.shift == pytest.approx(
        (z[0] * times.spread[0], math.exp(z[1] * times.spread[1]), 0.0)
    )


def test_a_cold_live_pools_refresh_widens_its_starts_by_what_its_replays_left_out() -> None:
    cluster = busy_pool()  # (one executor; w0 runs since T0, w1-w3 of 100 s wait)
    times = TaskTimes()
    for ran in (130.0, 140.0, 150.0, 160.0, 170.0, 145.0, 155.0, 135.0, 165.0, 150.0):
        times.record(100.0, ran + 2.0, ran)  # (stretches 1.3-1.7: their average unsure)
    refresh, _ = refresh_of(cluster, times=times, replays=1)  # (a dear pool's: one replay)
    refresh.poke()
    start = refresh.calibration["start"]
    spread = times.frozen().spread[1]
    assert spread > 0.0 and refresh.spread == pytest.approx(spread)
    assert start.shared == pytest.approx(shared_margin(spread, 1))
    assert start.shared > 0.05  # (their log-stretches' sd 0.09 over √10, t-scaled)
    for job_id, kept in refresh.kept.items():
        made, replayed = kept.forecast.computed_at, kept.start
        ahead = max(replayed.median - made, FLOOR)
        top = replayed.high + (start.prior + start.shared) * ahead
        assert kept.forecast.start_interval[1] == pytest.approx(top), job_id
        assert kept.forecast.start_interval[1] > replayed.high + start.prior * ahead
    refresh.close()


def test_a_pool_whose_tasks_are_alike_owes_no_shared_error() -> None:
    cluster = busy_pool()
    times = TaskTimes()
    for _ in range(10):
        times.record(100.0, 152.0, 150.0)
    refresh, _ = refresh_of(cluster, times=times)
    refresh.poke()
    assert refresh.calibration["start"].shared == pytest.approx(0.0, abs=1e-12)
    refresh.close()


def test_a_calibration_without_a_prior_keeps_none() -> None:
    cal = Calibration(None, least=LIVE_MIN_SCORES)
    cal.shared = 0.3
    assert cal.margin() is None
