"""A live pool's calibration takes its scores per lead band (sim.forecast_calibration, issue 80).

A burst's forecasts are made at once; its tail, the longest leads, is what later arrivals
overtake. Pooled, the tail's misses set the quantile and widen every lead; per band, a
forecast is widened by how forecasts that looked as far ahead came out.
"""

from __future__ import annotations

import pytest

from idlegate.sim.forecast import Span
from idlegate.sim.forecast_calibration import (
    FLOOR,
    LIVE_MIN_SCORES,
    Calibration,
    band,
    calibrations,
    conformal,
)


def test_a_band_is_a_doubling_of_the_lead_from_the_floor() -> None:
    assert [band(x) for x in (0.0, 3.0, FLOOR, 9.9)] == [0, 0, 0, 0]
    assert [band(x) for x in (10.0, 19.9, 20.0, 40.0, 80.0, 159.0, 160.0)] == [1, 1, 2, 3, 4, 4, 5]


def test_the_conformal_quantile_is_the_rank_of_n_plus_one() -> None:
    # n = 9 at 0.8: the ⌈10 · 0.8⌉ = 8th smallest; n = 4: the ⌈4⌉-th, the largest
    assert conformal([float(i) for i in range(9, 0, -1)], 0.8, 4, None) == 8.0
    assert conformal([3.0, 1.0, 4.0, 2.0], 0.8, 4, None) == 4.0
    assert conformal([1.0, 2.0], 0.8, 4, 0.25) == 0.25


def burst(cal: Calibration) -> None:
    """A cold burst's first forecasts, made at 0: 20 near the front (leads 10-20 s, two of
    them 1 s past the top, the rest at it) and 8 of its tail (leads 100-107 s, 15-22 s past
    the top: the arrivals that overtook them)."""
    for i in range(20):
        lead = 10.0 + i * 0.5
        actual = lead + (1.0 if i < 2 else 0.0)  # two of twenty 1 s past the top
        cal.record(Span(lead - 2.0, lead, lead), 0.0, actual)
    for i in range(8):
        lead = 100.0 + i
        cal.record(Span(lead - 5.0, lead, lead + 2.0), 0.0, lead + 2.0 + 15.0 + i)


def test_a_live_pools_front_is_not_widened_by_its_tails_misses() -> None:
    start = calibrations(live=True)["start"]
    burst(start)
    # the front's band (10-20 s): 20 scores, 18 of them inside (≤ 0), two 1 s past the top
    # of leads 10 and 10.5: the ⌈21 · 0.8⌉ = 17th smallest is inside, -0.0 (at the top)
    front = start.margin(15.0)
    assert front == pytest.approx(0.0)
    assert start.widen(Span(13.0, 15.0, 16.0), 0.0) == Span(13.0, 15.0, 16.0)
    # the tail's band (80-160 s): its 8 scores, the ⌈9 · 0.8⌉ = 8th, the largest: (15+7)/107
    assert start.margin(104.0) == pytest.approx(22.0 / 107.0)
    # pooled (28 scores, the tail 8 of them: over a fifth) every lead took the tail's, the
    # ⌈29 · 0.8⌉ = 24th smallest, the tail's fourth: 18 s past the top of 103 s
    pooled = Calibration(least=LIVE_MIN_SCORES)
    burst(pooled)
    assert pooled.margin(15.0) == pooled.margin() == pytest.approx(18.0 / 103.0)
    assert pooled.widen(Span(13.0, 15.0, 16.0), 0.0).high == pytest.approx(16.0 + 15 * 18 / 103)


def test_a_band_with_too_few_scores_takes_them_all() -> None:
    cal = Calibration(least=LIVE_MIN_SCORES, banded=True)
    for lead in (10.0, 11.0, 12.0, 13.0, 14.0):  # band 1 alone, 0.1 per second past the top
        cal.record(Span(lead - 1.0, lead, lead), 0.0, lead * 1.1)
    assert cal.margin(12.0) == pytest.approx(0.1)
    # a lead of 60 s (band 3) has no score of its own: the five of band 1
    assert cal.margin(60.0) == pytest.approx(0.1)
    widened = cal.widen(Span(55.0, 60.0, 62.0), 0.0)
    assert (widened.low, widened.high) == (pytest.approx(49.0), pytest.approx(68.0))


def test_a_waiting_workflows_finish_takes_the_starts_band_of_its_wait() -> None:
    cals = calibrations(live=True)
    burst(cals["start"])
    # a finish 30 s after a start 15 s ahead: the start's front band (0) over the 15 s
    # wait, nothing of its own (no prior, no scores) over the run
    finish = cals["finish"].widen(Span(40.0, 45.0, 50.0), 0.0, start=Span(13.0, 15.0, 16.0))
    assert finish == Span(40.0, 45.0, 50.0)
    # a start 104 s ahead: the tail's band over the wait
    far = cals["finish"].widen(Span(130.0, 134.0, 140.0), 0.0, start=Span(99.0, 104.0, 106.0))
    assert far.high == pytest.approx(140.0 + 22.0 / 107.0 * 104.0)


def test_the_simulators_calibration_is_not_banded_and_a_resume_keeps_the_leads() -> None:
    # `forecast evaluate`'s (non-live) pool quantile, as before
    assert not calibrations()["start"].banded and calibrations(live=True)["start"].banded
    older = Calibration()
    older.record(Span(0.0, 40.0, 50.0), 0.0, 60.0)
    live = calibrations(live=True)["start"]
    live.record(Span(0.0, 12.0, 14.0), 0.0, 14.0)
    live.resume(older)
    assert list(live.aheads) == [40.0, 12.0]
    assert list(live.scores) == [pytest.approx(0.25), 0.0]
